#pragma once
/// Function names of a process's code addresses, from the ELF files it has mapped: the reader of
/// ddprun-unwind (unwind_main.cpp). Each file's symbol table (.symtab, else .dynsym) is read once
/// (mmap), sorted, and searched; an address is turned into a file address through the mapping that
/// holds it and the file's PT_LOAD segments, so PIE executables, shared objects and non-PIE
/// executables are all read the same way. No ptrace here: only files and /proc/PID/maps text.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

/// One line of /proc/PID/maps that maps a file.
struct Mapping {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t offset = 0;
  bool executable = false;
  std::string path;
};

/// The file mappings in /proc/PID/maps text (anonymous, [heap], [vdso] and deleted files left out).
std::vector<Mapping> parse_maps(std::string_view text);

/// One ELF file's function symbols.
class ElfSymbols {
 public:
  /// Reads `path`; an unreadable or non-ELF file gives a table that names nothing.
  explicit ElfSymbols(const std::string& path);
  ~ElfSymbols();
  ElfSymbols(const ElfSymbols&) = delete;
  ElfSymbols& operator=(const ElfSymbols&) = delete;

  /// The file address (as symbols are valued) of byte `file_offset` of the file; nothing when no
  /// PT_LOAD segment holds it.
  std::optional<std::uint64_t> address_of_offset(std::uint64_t file_offset) const;
  /// The mangled name of the function holding `address`; empty when none does.
  std::string_view function_at(std::uint64_t address) const;
  bool shared_object() const { return shared_; }  ///< ET_DYN: a shared object or a PIE executable

 private:
  struct Symbol {
    std::uint64_t start;
    std::uint64_t size;
    const char* name;
  };
  struct Segment {
    std::uint64_t offset, vaddr, size;
  };
  void* image_ = nullptr;
  std::size_t length_ = 0;
  bool shared_ = false;
  std::vector<Symbol> symbols_;
  std::vector<Segment> segments_;
};

/// A process's address -> "function", "file" lookups, each file read once.
class AddressNames {
 public:
  explicit AddressNames(std::vector<Mapping> maps) : maps_(std::move(maps)) {}

  struct Name {
    std::string function;  ///< demangled; "??" when unknown
    std::string file;      ///< the mapped file's path; empty when none maps the address
    bool executable_file = false;  ///< the process's own executable (gdb says no "from" for it)
  };
  /// `executable` is /proc/PID/exe's target, to tell the program from its libraries.
  Name name(std::uint64_t address, const std::string& executable);

 private:
  std::vector<Mapping> maps_;
  std::map<std::string, std::unique_ptr<ElfSymbols>> files_;
};

/// `mangled` demangled (C++), or as it is.
std::string demangle(std::string_view mangled);

}  // namespace ddprun::launcher

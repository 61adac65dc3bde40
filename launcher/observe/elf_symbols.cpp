#include "launcher/observe/elf_symbols.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace ddprun::launcher {

std::vector<Mapping> parse_maps(std::string_view text) {
  std::vector<Mapping> maps;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    // 7f..-7f.. r-xp 00001000 08:01 1234   /usr/lib/x86_64-linux-gnu/libc.so.6
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode;
    if (!(fields >> range >> perms >> offset >> device >> inode)) continue;
    std::string path;
    std::getline(fields, path);
    path.erase(0, path.find_first_not_of(' '));
    if (path.empty() || path[0] != '/' || path.find(" (deleted)") != std::string::npos) continue;
    auto dash = range.find('-');
    if (dash == std::string::npos) continue;
    Mapping map;
    map.start = std::strtoull(range.substr(0, dash).c_str(), nullptr, 16);
    map.end = std::strtoull(range.substr(dash + 1).c_str(), nullptr, 16);
    map.offset = std::strtoull(offset.c_str(), nullptr, 16);
    map.executable = perms.size() > 2 && perms[2] == 'x';
    map.path = std::move(path);
    maps.push_back(std::move(map));
  }
  return maps;
}

ElfSymbols::ElfSymbols(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat info {};
  if (::fstat(fd, &info) != 0 || info.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    return;
  }
  void* image = ::mmap(nullptr, static_cast<std::size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (image == MAP_FAILED) return;
  image_ = image;
  length_ = static_cast<std::size_t>(info.st_size);
  const auto* bytes = static_cast<const unsigned char*>(image_);
  const auto* header = reinterpret_cast<const Elf64_Ehdr*>(bytes);
  if (std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 || header->e_ident[EI_CLASS] != ELFCLASS64) return;
  shared_ = header->e_type == ET_DYN;
  auto in_file = [this](std::uint64_t offset, std::uint64_t size) { return offset <= length_ && size <= length_ - offset; };
  if (in_file(header->e_phoff, std::uint64_t(header->e_phnum) * sizeof(Elf64_Phdr))) {
    const auto* phdrs = reinterpret_cast<const Elf64_Phdr*>(bytes + header->e_phoff);
    for (int i = 0; i < header->e_phnum; ++i) {
      if (phdrs[i].p_type == PT_LOAD) segments_.push_back({phdrs[i].p_offset, phdrs[i].p_vaddr, phdrs[i].p_filesz});
    }
  }
  if (!in_file(header->e_shoff, std::uint64_t(header->e_shnum) * sizeof(Elf64_Shdr))) return;
  const auto* sections = reinterpret_cast<const Elf64_Shdr*>(bytes + header->e_shoff);
  // .symtab when the file has one (every function), else .dynsym (the exported ones).
  const Elf64_Shdr* table = nullptr;
  for (int i = 0; i < header->e_shnum; ++i) {
    if (sections[i].sh_type == SHT_SYMTAB) table = &sections[i];
  }
  for (int i = 0; !table && i < header->e_shnum; ++i) {
    if (sections[i].sh_type == SHT_DYNSYM) table = &sections[i];
  }
  if (!table || table->sh_link >= header->e_shnum || !in_file(table->sh_offset, table->sh_size)) return;
  const Elf64_Shdr& strings = sections[table->sh_link];
  if (!in_file(strings.sh_offset, strings.sh_size) || strings.sh_size == 0) return;
  const char* names = reinterpret_cast<const char*>(bytes + strings.sh_offset);
  const auto* symbols = reinterpret_cast<const Elf64_Sym*>(bytes + table->sh_offset);
  const std::size_t count = table->sh_size / sizeof(Elf64_Sym);
  for (std::size_t i = 0; i < count; ++i) {
    const Elf64_Sym& symbol = symbols[i];
    const int type = ELF64_ST_TYPE(symbol.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || symbol.st_value == 0 || symbol.st_shndx == SHN_UNDEF) continue;
    if (symbol.st_name >= strings.sh_size) continue;
    symbols_.push_back({symbol.st_value, symbol.st_size, names + symbol.st_name});
  }
  std::sort(symbols_.begin(), symbols_.end(), [](const Symbol& a, const Symbol& b) {
    return a.start != b.start ? a.start < b.start : a.size > b.size;
  });
  // The last byte of the string table must end a string, so that every name is terminated.
  if (names[strings.sh_size - 1] != '\0') symbols_.clear();
}

ElfSymbols::~ElfSymbols() {
  if (image_) ::munmap(image_, length_);
}

std::optional<std::uint64_t> ElfSymbols::address_of_offset(std::uint64_t file_offset) const {
  for (const Segment& segment : segments_) {
    if (file_offset >= segment.offset && file_offset < segment.offset + segment.size) {
      return file_offset - segment.offset + segment.vaddr;
    }
  }
  return std::nullopt;
}

std::string_view ElfSymbols::function_at(std::uint64_t address) const {
  auto after = std::upper_bound(symbols_.begin(), symbols_.end(), address,
                                [](std::uint64_t a, const Symbol& s) { return a < s.start; });
  if (after == symbols_.begin()) return {};
  const Symbol& symbol = *std::prev(after);
  // A sized symbol holds [start, start+size); an unsized one runs to the next symbol.
  if (symbol.size > 0 && address >= symbol.start + symbol.size) return {};
  return symbol.name;
}

std::string demangle(std::string_view mangled) {
  std::string name(mangled);
  int status = 0;
  char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status == 0 && demangled) name = demangled;
  std::free(demangled);
  return name;
}

AddressNames::Name AddressNames::name(std::uint64_t address, const std::string& executable) {
  Name result{"??", "", false};
  for (const Mapping& map : maps_) {
    if (address < map.start || address >= map.end) continue;
    result.file = map.path;
    result.executable_file = map.path == executable;
    auto& file = files_[map.path];
    if (!file) file = std::make_unique<ElfSymbols>(map.path);
    auto file_address = file->address_of_offset(address - map.start + map.offset);
    if (!file_address) break;
    std::string_view function = file->function_at(*file_address);
    if (!function.empty()) result.function = demangle(function);
    break;
  }
  return result;
}

}  // namespace ddprun::launcher

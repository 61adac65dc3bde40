#include "launcher/workers/elf_needed.hpp"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace ddprun::launcher {
namespace {

/// Reads exactly `size` bytes at `offset`; false on a short read or an error.
bool read_at(int fd, void* into, std::size_t size, std::uint64_t offset) {
  auto* out = static_cast<char*>(into);
  while (size > 0) {
    ssize_t n = ::pread(fd, out, size, static_cast<off_t>(offset));
    if (n <= 0) return false;
    out += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

/// A file descriptor closed on every way out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Bounds on what a sane executable holds; a larger count means a corrupt or hostile file.
constexpr std::uint16_t kMaxSections = 8192;
constexpr std::uint64_t kMaxDynamicBytes = 1 << 20;
constexpr std::uint64_t kMaxStringTableBytes = 16 << 20;

}  // namespace

std::vector<std::string> elf_needed(const std::string& path) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)};
  if (file.fd < 0) return {};
  Elf64_Ehdr header{};
  if (!read_at(file.fd, &header, sizeof header, 0) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
      header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shnum == 0 || header.e_shnum > kMaxSections) {
    return {};
  }
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (!read_at(file.fd, sections.data(), sections.size() * sizeof(Elf64_Shdr), header.e_shoff)) return {};

  std::vector<std::string> needed;
  for (const Elf64_Shdr& dynamic : sections) {
    if (dynamic.sh_type != SHT_DYNAMIC || dynamic.sh_size > kMaxDynamicBytes || dynamic.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strings = sections[dynamic.sh_link];  // .dynstr
    if (strings.sh_size == 0 || strings.sh_size > kMaxStringTableBytes) continue;
    std::vector<Elf64_Dyn> entries(dynamic.sh_size / sizeof(Elf64_Dyn));
    std::string table(strings.sh_size, '\0');
    if (!read_at(file.fd, entries.data(), entries.size() * sizeof(Elf64_Dyn), dynamic.sh_offset) ||
        !read_at(file.fd, table.data(), table.size(), strings.sh_offset)) {
      continue;
    }
    for (const Elf64_Dyn& entry : entries) {
      if (entry.d_tag == DT_NULL) break;
      if (entry.d_tag != DT_NEEDED || entry.d_un.d_val >= table.size()) continue;
      needed.emplace_back(table.c_str() + entry.d_un.d_val);  // NUL-terminated within the table
    }
  }
  return needed;
}

}  // namespace ddprun::launcher

/// The two glibc functions newer than 2.34 that the static runtime libraries of a Debian 12 build
/// would make the portable binaries (scripts/package.sh) ask for, defined here so that those
/// binaries load on glibc 2.34 (RHEL 9, Ubuntu 22.04 has 2.35) rather than only on 2.36 and later:
/// - arc4random (GLIBC_2.36): libstdc++.a's std::random_device uses it when the headers have it;
/// - _dl_find_object (GLIBC_2.35): libgcc_eh.a (-static-libgcc) finds a frame's unwind tables
///   with it on every C++ throw.
/// A definition in the executable satisfies those references at link time, so no versioned
/// reference to glibc remains; glibc's own code keeps calling its own (internal) functions.
/// Each does what glibc documents, with older glibc calls (getrandom 2.25, dl_iterate_phdr).
/// Linked into the portable binaries only (DDPRUN_PORTABLE); packaging/glibc_only.py checks
/// the result.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace {

/// Fills `size` bytes from the kernel's generator: getrandom, or /dev/urandom where the kernel
/// predates getrandom (ENOSYS, before Linux 3.17), as glibc's arc4random does.
bool kernel_random(unsigned char* bytes, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = ::getrandom(bytes + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOSYS) break;
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  if (got == size) return true;
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  while (got < size) {
    ssize_t n = ::read(fd, bytes + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return got == size;
}

}  // namespace

extern "C" uint32_t arc4random() noexcept {
  uint32_t value = 0;
  // As glibc's: arc4random cannot fail, and must never return bytes that are not random.
  if (!kernel_random(reinterpret_cast<unsigned char*>(&value), sizeof value)) std::abort();
  return value;
}

namespace {

struct FindObject {
  uintptr_t address;
  dl_find_object* result;
  bool found = false;
};

/// Fills search->result for the loaded object one of whose PT_LOAD segments holds the address.
int find_in_object(dl_phdr_info* info, std::size_t, void* data) {
  auto* search = static_cast<FindObject*>(data);
  uintptr_t start = UINTPTR_MAX, end = 0;
  bool holds = false;
  void* eh_frame = nullptr;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD) {
      start = begin < start ? begin : start;
      end = begin + segment.p_memsz > end ? begin + segment.p_memsz : end;
      holds = holds || (search->address >= begin && search->address < begin + segment.p_memsz);
    } else if (segment.p_type == DLFO_EH_SEGMENT_TYPE) {
      eh_frame = reinterpret_cast<void*>(begin);
    }
  }
  if (!holds) return 0;
  dl_find_object* result = search->result;
  result->dlfo_flags = 0;
  result->dlfo_map_start = reinterpret_cast<void*>(start);
  result->dlfo_map_end = reinterpret_cast<void*>(end);
  result->dlfo_eh_frame = eh_frame;
  result->dlfo_link_map = nullptr;
  Dl_info where;
  void* link_map = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(search->address), &where, &link_map, RTLD_DL_LINKMAP) != 0) {
    result->dlfo_link_map = static_cast<struct link_map*>(link_map);
  }
  search->found = true;
  return 1;  // stops the iteration
}

}  // namespace

extern "C" int _dl_find_object(void* address, dl_find_object* result) noexcept {
  FindObject search{reinterpret_cast<uintptr_t>(address), result};
  ::dl_iterate_phdr(find_in_object, &search);
  return search.found ? 0 : -1;
}

/// ddprun-unwind PID...: the native frames of every thread of each process, printed as gdb's
/// `thread apply all bt` prints them ("Thread N (LWP T) "comm":", "#0  0x... in f () from /lib/x.so"),
/// so that ddprun reads both the same way (stack_text.hpp). ddprun runs it for --hang-timeout's
/// stacks in place of gdb, which spends a second or more of a core loading symbols per process (and
/// ~2.5 s for libtorch's) where this reads each file's symbol table once, by mmap.
///
/// Each thread is stopped with PTRACE_SEIZE + PTRACE_INTERRUPT (no SIGSTOP is sent, so no group
/// stop can be left behind), every thread of a process before any is read (one moment's picture),
/// unwound by libunwind from the files' .eh_frame, and let go with PTRACE_DETACH. A thread in a
/// system call has the call restarted, as under gdb. Exit status 0; a process that cannot be read
/// gets gdb's words for why ("ptrace: Operation not permitted.") and the others are still read.
#include <dirent.h>
#include <libunwind-ptrace.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/observe/elf_symbols.hpp"

namespace {

using ddprun::launcher::AddressNames;

constexpr int kMaxFrames = 256;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<pid_t> threads_of(pid_t pid) {
  std::vector<pid_t> tids;
  DIR* dir = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (!dir) return tids;
  while (dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    long tid = std::strtol(entry->d_name, &end, 10);
    if (end && *end == '\0' && tid > 0) tids.push_back(static_cast<pid_t>(tid));
  }
  ::closedir(dir);
  std::sort(tids.begin(), tids.end());
  return tids;
}

/// Stops `tid` under ptrace without a signal; false (errno set) when it cannot.
bool stop_thread(pid_t tid) {
  if (::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) return false;
  if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
    int error = errno;
    ::ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
    errno = error;
    return false;
  }
  int status = 0;
  while (::waitpid(tid, &status, __WALL) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFSTOPPED(status);
}

void print_thread(unw_addr_space_t space, pid_t tid, int number, AddressNames& names, const std::string& exe) {
  std::string comm = read_text("/proc/" + std::to_string(tid) + "/comm");
  if (!comm.empty() && comm.back() == '\n') comm.pop_back();
  std::printf("\nThread %d (LWP %d) \"%s\":\n", number, tid, comm.c_str());
  void* context = _UPT_create(tid);
  if (!context) return;
  unw_cursor_t cursor;
  if (unw_init_remote(&cursor, space, context) == 0) {
    for (int frame = 0; frame < kMaxFrames; ++frame) {
      unw_word_t ip = 0;
      if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
      // A caller's frame holds a return address: the call is the byte before it.
      AddressNames::Name name = names.name(frame == 0 ? ip : ip - 1, exe);
      if (name.file.empty() || name.executable_file) {
        std::printf("#%-2d 0x%016lx in %s ()\n", frame, static_cast<unsigned long>(ip), name.function.c_str());
      } else {
        std::printf("#%-2d 0x%016lx in %s () from %s\n", frame, static_cast<unsigned long>(ip), name.function.c_str(),
                    name.file.c_str());
      }
      if (unw_step(&cursor) <= 0) break;
    }
  }
  _UPT_destroy(context);
}

void read_process(pid_t pid) {
  std::printf("Process %d:\n", pid);
  std::vector<pid_t> tids = threads_of(pid);
  if (tids.empty()) {
    std::printf("ptrace: No such process.\n");
    return;
  }
  std::vector<pid_t> stopped;
  for (pid_t tid : tids) {
    if (stop_thread(tid)) {
      stopped.push_back(tid);
    } else if (tid == pid) {
      std::printf("ptrace: %s.\n", errno == EPERM ? "Operation not permitted" : std::strerror(errno));
    }
  }
  if (!stopped.empty()) {
    AddressNames names(ddprun::launcher::parse_maps(read_text("/proc/" + std::to_string(pid) + "/maps")));
    char exe[4096] = "";
    ssize_t length = ::readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1);
    exe[length > 0 ? length : 0] = '\0';
    unw_addr_space_t space = unw_create_addr_space(&_UPT_accessors, 0);
    unw_set_caching_policy(space, UNW_CACHE_GLOBAL);
    // As gdb: the newest thread first, the main thread (Thread 1) last.
    for (std::size_t i = stopped.size(); i-- > 0;) {
      const int number = static_cast<int>(std::find(tids.begin(), tids.end(), stopped[i]) - tids.begin()) + 1;
      print_thread(space, stopped[i], number, names, exe);
    }
    unw_destroy_addr_space(space);
  }
  for (pid_t tid : stopped) ::ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ddprun-unwind PID...\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    long pid = std::strtol(argv[i], &end, 10);
    if (!end || *end != '\0' || pid <= 1) {
      std::fprintf(stderr, "ddprun-unwind: not a pid: %s\n", argv[i]);
      return 2;
    }
    read_process(static_cast<pid_t>(pid));
  }
  return 0;
}

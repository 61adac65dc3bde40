#include "launcher/workers/reaper.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/integer.hpp"
#include "launcher/base/safe_kill.hpp"

namespace ddprun::launcher {
namespace {

/// The parent pid from /proc/<pid>/stat; the command name may hold spaces and ')' so the fields
/// are read after the last ')'.
pid_t parent_of(const std::string& pid_text) {
  std::ifstream stat("/proc/" + pid_text + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return -1;
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 4 >= line.size()) return -1;
  // ") S 1234 ..." : state, then ppid.
  std::string_view fields = std::string_view(line).substr(close + 4);
  return common::parse_integer<pid_t>(fields.substr(0, fields.find(' '))).value_or(-1);
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return children;
  while (dirent* entry = ::readdir(proc)) {
    auto pid = common::parse_integer<pid_t>(entry->d_name);  // a process's folder, not /proc/self or a file
    if (pid && parent_of(entry->d_name) == parent) children.push_back(*pid);
  }
  ::closedir(proc);
  return children;
}

}  // namespace

bool become_subreaper() { return ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0; }

void reap_exited_children(const std::function<void(pid_t, int)>& on_exit) {
  while (true) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      on_exit(pid, status);
      continue;
    }
    if (pid < 0 && errno == EINTR) continue;
    return;  // 0: children remain but none has exited; -1/ECHILD: no children at all
  }
}

int kill_remaining_children(pid_t spare, int max_rounds) {
  int killed = 0;
  for (int round = 0; round < max_rounds; ++round) {
    auto children = children_of(::getpid());
    std::erase(children, spare);
    if (children.empty()) break;
    for (pid_t pid : children) {
      if (signal_process(pid, SIGKILL)) ++killed;
    }
    for (pid_t pid : children) {
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
  return killed;
}

}  // namespace ddprun::launcher

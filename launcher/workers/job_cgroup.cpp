#include "launcher/workers/job_cgroup.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "common/integer.hpp"
#include "launcher/base/safe_kill.hpp"

namespace ddprun::launcher {
namespace {

/// mountinfo escapes space, tab, newline and backslash in paths as \ooo.
std::string unescape_octal(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      if (auto value = common::parse_integer<int>(text.substr(i + 1, 3), 8)) {
        out.push_back(static_cast<char>(*value));
        i += 3;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

/// Writes `text` to the control file `path`; false when it cannot.
bool write_control(const std::string& path, std::string_view text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

/// The pids listed in a cgroup.procs file.
std::vector<pid_t> pids_in(const std::string& procs_path) {
  std::vector<pid_t> pids;
  std::istringstream lines(read_text(procs_path));
  pid_t pid = 0;
  while (lines >> pid) pids.push_back(pid);
  return pids;
}

}  // namespace

std::optional<std::string> cgroup2_mount_point(std::string_view mountinfo) {
  while (!mountinfo.empty()) {
    auto end = mountinfo.find('\n');
    std::string_view line = mountinfo.substr(0, end);
    mountinfo = end == std::string_view::npos ? std::string_view() : mountinfo.substr(end + 1);
    // "<id> <parent> <dev> <root> <mount point> <options> [optional fields...] - <fstype> <source> ..."
    auto separator = line.find(" - ");
    if (separator == std::string_view::npos) continue;
    std::string_view after = line.substr(separator + 3);
    if (after.substr(0, after.find(' ')) != "cgroup2") continue;
    std::istringstream fields{std::string(line.substr(0, separator))};
    std::string id, parent, device, root, mount_point;
    if (fields >> id >> parent >> device >> root >> mount_point) return unescape_octal(mount_point);
  }
  return std::nullopt;
}

std::optional<std::string> cgroup2_path_of(std::string_view proc_cgroup) {
  while (!proc_cgroup.empty()) {
    auto end = proc_cgroup.find('\n');
    std::string_view line = proc_cgroup.substr(0, end);
    proc_cgroup = end == std::string_view::npos ? std::string_view() : proc_cgroup.substr(end + 1);
    if (line.starts_with("0::")) return std::string(line.substr(3));
  }
  return std::nullopt;
}

bool kill_cgroup(const std::string& dir) {
  if (write_control(dir + "/cgroup.kill", "1")) return true;
  // Before Linux 5.14: freeze-free fallback, killing what is listed until nothing new appears.
  bool any = false;
  for (int round = 0; round < 50; ++round) {
    auto pids = pids_in(dir + "/cgroup.procs");
    if (pids.empty()) return true;
    for (pid_t pid : pids) any = signal_process(pid, SIGKILL) || any;
  }
  return any;
}

bool remove_cgroup(const std::string& dir, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    // EBUSY: the killed processes are not reaped yet (their parent is us, or a subreaper).
    if (errno != EBUSY || std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::unique_ptr<JobCgroup> JobCgroup::create() {
  auto mount = cgroup2_mount_point(read_text("/proc/self/mountinfo"));
  auto own = cgroup2_path_of(read_text("/proc/self/cgroup"));
  if (!mount || !own) return nullptr;
  std::string parent = *mount + (*own == "/" ? std::string() : *own);
  // Named for the job, not for the pid alone: ddprun in a PID namespace has the pid of other
  // jobs' ddprun (2, say) under the same parent, and a finished job's guardian sweeps its folder
  // by name; with the pid alone, it killed the next job's workers or removed its cgroup.
  std::random_device device;
  char tag[17] = {};
  std::snprintf(tag, sizeof tag, "%016llx",
                static_cast<unsigned long long>(std::uniform_int_distribution<std::uint64_t>()(device)));
  std::string dir = parent + "/ddprun-" + std::to_string(::getpid()) + "-" + tag;
  if (::mkdir(dir.c_str(), 0755) != 0) return nullptr;
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    ::rmdir(dir.c_str());
    return nullptr;
  }
  return std::unique_ptr<JobCgroup>(new JobCgroup(std::move(dir), fd));
}

JobCgroup::~JobCgroup() {
  ::close(dir_fd_);
  kill_cgroup(dir_);
  remove_cgroup(dir_, std::chrono::milliseconds(1000));
}

}  // namespace ddprun::launcher

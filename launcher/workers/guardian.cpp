#include "launcher/workers/guardian.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <random>
#include <set>
#include <string_view>

#include "common/integer.hpp"
#include "launcher/workers/job_cgroup.hpp"
#include "launcher/base/safe_kill.hpp"

namespace ddprun::launcher {
namespace {

constexpr int kNoteFd = 3;

/// Whether process `pid`'s environment holds exactly `entry` ("NAME=value") as one variable.
bool environment_has(pid_t pid, std::string_view entry) {
  int fd = ::open(("/proc/" + std::to_string(pid) + "/environ").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // gone, or another user's
  std::string text;
  std::array<char, 16384> chunk{};
  while (text.size() < (1 << 20)) {
    ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(chunk.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  std::string_view rest = text;
  while (!rest.empty()) {
    auto end = rest.find('\0');
    if (rest.substr(0, end) == entry) return true;
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return false;
}

/// SIGKILLs every process (but this one) that carries `entry`; returns how many.
int kill_marked(std::string_view entry) {
  int killed = 0;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return 0;
  const pid_t self = ::getpid();
  while (dirent* item = ::readdir(proc)) {
    auto pid = common::parse_integer<pid_t>(item->d_name);
    if (!pid || *pid == self) continue;
    if (environment_has(*pid, entry) && signal_process(*pid, SIGKILL)) ++killed;
  }
  ::closedir(proc);
  return killed;
}

/// The agent is gone: nothing it started may stay. After a clean end only the cgroup is swept
/// (exact: nothing else can be in it); the process groups and the marker are for a dead agent.
void sweep(const std::string& cgroup_dir, const std::set<pid_t>& groups, const std::string& marker, bool clean) {
  if (!cgroup_dir.empty()) kill_cgroup(cgroup_dir);
  if (clean) {
    if (!cgroup_dir.empty()) remove_cgroup(cgroup_dir, std::chrono::milliseconds(2000));
    return;
  }
  for (pid_t pgid : groups) signal_process_group(pgid, SIGKILL);
  const std::string entry = std::string(kGuardianMarkVariable) + "=" + marker;
  // Repeated: a fork fan may start a new process between our look and our kill.
  for (int round = 0; round < 100 && kill_marked(entry) > 0; ++round) {
  }
  // The killed are orphans now, reaped by init when it gets to them: until then the cgroup is busy.
  // Nobody waits for the guardian, so it may wait long.
  if (!cgroup_dir.empty()) remove_cgroup(cgroup_dir, std::chrono::seconds(30));
}

[[noreturn]] void run_guardian(int note_fd, const std::string& cgroup_dir, const std::string& marker) {
  ::setsid();  // no controlling terminal: a hangup or a Ctrl-C aimed at the agent's group misses us
  for (int signo : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM}) {
    ::signal(signo, SIG_IGN);
  }
  ::prctl(PR_SET_NAME, "ddprun-guardian");
  // Hold nothing of the agent's: a console pipe held open here would keep `ddprun | cat` from ending.
  int devnull = ::open("/dev/null", O_RDWR);
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) ::dup2(devnull, fd);
  ::dup2(note_fd, kNoteFd);
  ::syscall(SYS_close_range, static_cast<unsigned>(kNoteFd + 1), ~0U, 0U);

  std::set<pid_t> groups;
  bool clean = false;
  std::string pending;
  std::array<char, 4096> chunk{};
  while (true) {
    ssize_t n = ::read(kNoteFd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of file: the agent is gone
    pending.append(chunk.data(), static_cast<std::size_t>(n));
    std::size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      std::string_view note(pending.data(), newline);
      if (note == "c") clean = true;
      if (note.empty() || note == "c") {
        pending.erase(0, newline + 1);
        continue;
      }
      pid_t pgid = common::parse_integer<pid_t>(note.substr(1)).value_or(0);  // 0: never signalable
      if (note.front() == '+' && is_signalable(pgid)) groups.insert(pgid);
      if (note.front() == '-') groups.erase(pgid);
      pending.erase(0, newline + 1);
    }
  }
  sweep(cgroup_dir, groups, marker, clean);
  ::_exit(0);
}

}  // namespace

std::string new_guardian_marker() {
  std::random_device device;
  std::uniform_int_distribution<std::uint64_t> pick;
  std::array<char, 17> hex{};
  auto value = pick(device);
  for (int i = 15; i >= 0; --i, value >>= 4) hex[static_cast<std::size_t>(i)] = "0123456789abcdef"[value & 0xF];
  return std::to_string(::getpid()) + "-" + std::string(hex.data(), 16);
}

std::unique_ptr<Guardian> Guardian::start(const std::string& cgroup_dir, const std::string& marker) {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) return nullptr;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return nullptr;
  }
  if (pid == 0) {
    ::close(fds[1]);
    run_guardian(fds[0], cgroup_dir, marker);
  }
  ::close(fds[0]);
  // Ours alone (close-on-exec, never given to a worker), so non-blocking affects nobody else.
  ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  return std::unique_ptr<Guardian>(new Guardian(pid, fds[1]));
}

// The pipe is left open on purpose: the kernel closes it when this process exits, and only then may
// the guardian act. Closed here, the guardian would kill the job's cgroup while the agent, in it,
// still finishes (a lingering store, destructors), and so the agent itself.
Guardian::~Guardian() = default;

void Guardian::watch(pid_t pgid) { send("+" + std::to_string(pgid) + "\n"); }

void Guardian::forget(pid_t pgid) { send("-" + std::to_string(pgid) + "\n"); }

void Guardian::send(std::string note) {
  if (pipe_fd_ < 0) return;
  unsent_ += note;
  while (!unsent_.empty()) {
    ssize_t n = ::write(pipe_fd_, unsent_.data(), unsent_.size());
    if (n > 0) {
      unsent_.erase(0, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;  // EAGAIN: the guardian lags; these go with the next note. EPIPE: it is gone.
    }
  }
}

void Guardian::mark_clean() { send("c\n"); }

}  // namespace ddprun::launcher

#include "worker_process.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>
#include <vector>

#include "errors.hpp"
#include "unique_fd.hpp"

namespace ddprun::launcher {
namespace {

/// The errno text of a failed start, with what to do when it is a limit of the machine.
std::string describe_start_errno(int error) {
  std::string text = std::strerror(error);
  if (error == EMFILE) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    return text + " (the open-file limit is " + std::to_string(limit.rlim_cur) +
           "; each worker needs 3 descriptors: raise it with ulimit -n, or start fewer workers)";
  }
  if (error == ENFILE) return text + " (the system's file table is full)";
  if (error == EAGAIN || error == ENOMEM) {
    return text + " (the process limit, ulimit -u, or the memory is exhausted)";
  }
  return text;
}

/// A pipe whose ends close on exec; the child dup2()s the write end onto 1 or 2. Throws the errno.
struct Pipe {
  UniqueFd read_end;
  UniqueFd write_end;
  Pipe() {
    std::array<int, 2> fds{};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category());
    read_end = UniqueFd(fds[0]);
    write_end = UniqueFd(fds[1]);
  }
};

/// What the child needs between clone and exec, made before the clone: after it, in a process
/// with several threads, only async-signal-safe calls are allowed.
struct ExecPlan {
  const char* path;
  std::vector<char*> argv;
  std::vector<char*> envp;
  pid_t agent_pid;
  int stdout_fd;
  int stderr_fd;
  int devnull_fd;
  int error_fd;  ///< write end of the exec-error pipe (close-on-exec)
};

/// Runs in the child between clone and exec: only async-signal-safe calls here.
[[noreturn]] void exec_worker(const ExecPlan& plan) {
  ::setpgid(0, 0);  // own process group: the agent signals the worker and all it spawned at once
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // die with the agent, even when it is SIGKILLed
  if (::getppid() != plan.agent_pid) ::_exit(127);  // the agent died before prctl took effect
  ::dup2(plan.devnull_fd, STDIN_FILENO);
  ::dup2(plan.stdout_fd, STDOUT_FILENO);
  ::dup2(plan.stderr_fd, STDERR_FILENO);
  // The agent ignores SIGPIPE and may block signals; a worker starts with the defaults.
  ::signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Like torchrun (Python's close_fds), workers inherit only 0, 1 and 2. CLOEXEC rather than close
  // keeps the exec-error pipe open until the exec.
  ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  ::execve(plan.path, plan.argv.data(), plan.envp.data());
  const int error = errno;
  [[maybe_unused]] auto n = ::write(plan.error_fd, &error, sizeof error);
  ::_exit(127);
}

/// fork(), or clone3() straight into the cgroup behind `cgroup_fd`: born there, a process costs no
/// migration (which waits for an RCU grace period, up to milliseconds). -1 with errno on failure.
pid_t clone_process(int cgroup_fd) {
  if (cgroup_fd >= 0) {
    clone_args args{};
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
    long pid = ::syscall(SYS_clone3, &args, sizeof args);
    if (pid >= 0 || (errno != ENOSYS && errno != E2BIG && errno != EINVAL)) return static_cast<pid_t>(pid);
    // A kernel before 5.7: no cgroup for this worker; the guardian's other means still hold.
  }
  return ::fork();
}

}  // namespace

SpawnedWorker spawn_worker(const WorkerSpec& spec, const Environ& env, const SpawnSettings& settings) {
  auto failed = [&](const std::string& reason) {
    return LaunchError("cannot start worker " + std::to_string(spec.local_rank) + " (" + spec.executable +
                       "): " + reason);
  };
  std::optional<Pipe> out;
  std::optional<Pipe> err;
  std::optional<Pipe> exec_error;
  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  try {
    out.emplace();
    err.emplace();
    exec_error.emplace();
  } catch (const std::system_error& error) {
    throw failed(describe_start_errno(error.code().value()));
  }
  if (devnull.get() < 0) throw failed("cannot open /dev/null: " + describe_start_errno(errno));

  std::vector<std::string> env_entries;
  env_entries.reserve(env.size());
  for (const auto& [name, value] : env) env_entries.push_back(name + "=" + value);
  std::vector<std::string> argv = spec.argv.empty() ? std::vector<std::string>{spec.executable} : spec.argv;
  ExecPlan plan{spec.executable.c_str(), {}, {}, ::getpid(), out->write_end.get(), err->write_end.get(),
                devnull.get(), exec_error->write_end.get()};
  for (auto& arg : argv) plan.argv.push_back(arg.data());
  plan.argv.push_back(nullptr);
  for (auto& entry : env_entries) plan.envp.push_back(entry.data());
  plan.envp.push_back(nullptr);

  const pid_t pid = clone_process(settings.cgroup_fd);
  if (pid == 0) exec_worker(plan);
  if (pid < 0) throw failed(describe_start_errno(errno));
  ::setpgid(pid, pid);  // also from the parent, so the group exists before we ever signal it
  out->write_end.reset();
  err->write_end.reset();
  exec_error->write_end.reset();
  // The exec-error pipe closes on a successful exec; an errno comes through it when exec failed.
  int exec_errno = 0;
  ssize_t n = 0;
  while ((n = ::read(exec_error->read_end.get(), &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  if (n == sizeof exec_errno) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw failed(describe_start_errno(exec_errno));
  }
  SpawnedWorker spawned{pid, out->read_end.get(), err->read_end.get()};
  out->read_end.release();
  err->read_end.release();
  return spawned;
}

}  // namespace ddprun::launcher

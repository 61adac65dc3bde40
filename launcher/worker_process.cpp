#include "worker_process.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <boost/process/child.hpp>
#include <boost/process/env.hpp>
#include <boost/process/environment.hpp>
#include <boost/process/args.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/extend.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>

#include "errors.hpp"
#include "safe_kill.hpp"
#include "unique_fd.hpp"

namespace bp = boost::process;

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

/// Runs in the child between fork and exec: only async-signal-safe calls here.
struct WorkerExecSetup : bp::extend::handler {
  pid_t agent_pid;
  int stdout_fd;
  int stderr_fd;
  int devnull_fd;

  template <class Executor>
  void on_exec_setup(Executor&) const {
    ::setpgid(0, 0);  // own process group: the agent signals the worker and all it spawned at once
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // die with the agent, even when it is SIGKILLed
    if (::getppid() != agent_pid) ::_exit(127);  // the agent died before prctl took effect
    ::dup2(devnull_fd, STDIN_FILENO);
    ::dup2(stdout_fd, STDOUT_FILENO);
    ::dup2(stderr_fd, STDERR_FILENO);
    // The agent ignores SIGPIPE and may block signals; a worker starts with the defaults.
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Like torchrun (Python's close_fds), workers inherit only 0, 1 and 2. CLOEXEC rather than close
    // keeps Boost.Process's exec-error pipe working.
    ::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  }
};

bp::environment to_bp_environment(const Environ& env) {
  bp::environment out;
  for (const auto& [name, value] : env) out[name] = value;
  return out;
}

}  // namespace

SpawnedWorker spawn_worker(const WorkerSpec& spec, const Environ& env) {
  auto failed = [&](const std::string& reason) {
    return LaunchError("cannot start worker " + std::to_string(spec.local_rank) + " (" + spec.executable +
                       "): " + reason);
  };
  std::optional<Pipe> out;
  std::optional<Pipe> err;
  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  try {
    out.emplace();
    err.emplace();
  } catch (const std::system_error& error) {
    throw failed(describe_start_errno(error.code().value()));
  }
  if (devnull.get() < 0) throw failed("cannot open /dev/null: " + describe_start_errno(errno));

  std::vector<std::string> args(spec.argv.begin() + (spec.argv.empty() ? 0 : 1), spec.argv.end());
  std::error_code ec;
  errno = 0;
  bp::child child(bp::exe = spec.executable, bp::args = args, bp::env = to_bp_environment(env),
                  WorkerExecSetup{{}, ::getpid(), out->write_end.get(), err->write_end.get(), devnull.get()},
                  ec);
  const int start_errno = errno;
  // Boost.Process 1.74 reports some failures (no descriptor left for its own exec-error pipe, a
  // failed fork) as a child with pid -1 and no error code. Such a child does not exist: keeping it
  // would later signal group -(-1), that is PID 1.
  const pid_t pid = ec ? -1 : child.id();
  if (!is_signalable(pid)) {
    if (ec) throw failed(ec.message());
    throw failed(start_errno != 0 ? describe_start_errno(start_errno) : "the process could not be created");
  }
  // The agent reaps children itself (SIGCHLD + waitpid), so Boost.Process must never wait.
  child.detach();
  ::setpgid(pid, pid);  // also from the parent, so the group exists before we ever signal it
  SpawnedWorker spawned{pid, out->read_end.get(), err->read_end.get()};
  out->read_end.release();
  err->read_end.release();
  return spawned;
}

}  // namespace ddprun::launcher

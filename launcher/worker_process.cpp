#include "worker_process.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
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

#include "errors.hpp"

namespace bp = boost::process;

namespace ddprun::launcher {
namespace {

/// A pipe whose ends close on exec; the child dup2()s the write end onto 1 or 2.
struct Pipe {
  int read_fd = -1;
  int write_fd = -1;
  Pipe() {
    std::array<int, 2> fds{};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
      throw LaunchError(std::string("cannot create a pipe for worker output: ") + std::strerror(errno));
    }
    read_fd = fds[0];
    write_fd = fds[1];
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
  Pipe out;
  Pipe err;
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) throw LaunchError(std::string("cannot open /dev/null: ") + std::strerror(errno));

  std::vector<std::string> args(spec.argv.begin() + (spec.argv.empty() ? 0 : 1), spec.argv.end());
  std::error_code ec;
  bp::child child(bp::exe = spec.executable, bp::args = args, bp::env = to_bp_environment(env),
                  WorkerExecSetup{{}, ::getpid(), out.write_fd, err.write_fd, devnull}, ec);
  ::close(out.write_fd);
  ::close(err.write_fd);
  ::close(devnull);
  if (ec) {
    ::close(out.read_fd);
    ::close(err.read_fd);
    throw LaunchError("cannot start worker " + std::to_string(spec.local_rank) + " (" +
                      spec.executable + "): " + ec.message());
  }
  // The agent reaps children itself (SIGCHLD + waitpid), so Boost.Process must never wait.
  child.detach();
  pid_t pid = child.id();
  ::setpgid(pid, pid);  // also from the parent, so the group exists before we ever signal it
  return {pid, out.read_fd, err.read_fd};
}

}  // namespace ddprun::launcher

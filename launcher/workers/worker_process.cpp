#include "launcher/workers/worker_process.hpp"

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
#include <string_view>
#include <system_error>
#include <vector>

#include "launcher/base/errors.hpp"
#include "launcher/devices/numa_topology.hpp"
#include "launcher/base/unique_fd.hpp"
#include "launcher/workers/worker_pty.hpp"

namespace ddprun::launcher {
namespace {

/// The errno text of a failed start, with what to do when it is a limit of the machine.
std::string describe_start_errno(int error) {
  std::string text = std::strerror(error);
  if (error == EMFILE) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    return text + " (the open-file limit is " + std::to_string(limit.rlim_cur) +
           "; each worker needs 3 descriptors (4 with ptys): raise it with ulimit -n, or start fewer workers)";
  }
  if (error == ENFILE) return text + " (the system's file table is full)";
  if (error == EAGAIN || error == ENOMEM) {
    return text + " (the process limit, ulimit -u, or the memory is exhausted)";
  }
  return text;
}

/// The folder behind the job cgroup's descriptor, as /proc shows it (" (deleted)" cut off).
std::string cgroup_path_of(int cgroup_fd) {
  std::array<char, 4096> path{};
  const std::string link = "/proc/self/fd/" + std::to_string(cgroup_fd);
  const ssize_t n = ::readlink(link.c_str(), path.data(), path.size() - 1);
  if (n <= 0) return "(descriptor " + std::to_string(cgroup_fd) + ")";
  std::string text(path.data(), static_cast<std::size_t>(n));
  constexpr std::string_view kDeleted = " (deleted)";
  if (text.ends_with(kDeleted)) text.resize(text.size() - kDeleted.size());
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
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  int error_fd;  ///< write end of the exec-error pipe (close-on-exec)
  int terminal_fd;  ///< the pty slave to make the controlling terminal of a new session; -1: none
  int control_fd;   ///< becomes the child's descriptor 3 (SpawnSettings::control_fd); -1: none
  const unsigned long* cpu_mask;  ///< --numa-binding: the CPUs to bind to, as sched_setaffinity's mask; null: none
  std::size_t cpu_mask_bytes;
};

/// What failed in the child before the program ran; sent with its errno through the exec-error pipe.
enum class ChildStep : int { exec, terminal, cpu_binding };

struct ChildFailure {
  ChildStep step;
  int error;
};

/// Only async-signal-safe calls: this runs between clone and exec.
[[noreturn]] void fail_in_child(const ExecPlan& plan, ChildStep step) {
  const ChildFailure failure{step, errno};
  [[maybe_unused]] auto n = ::write(plan.error_fd, &failure, sizeof failure);
  ::_exit(127);
}

/// sched_setaffinity's mask of `cpus` (bits of unsigned long words, as the kernel reads it).
std::vector<unsigned long> cpu_mask_of(const std::vector<int>& cpus) {
  constexpr int kBits = static_cast<int>(sizeof(unsigned long) * 8);
  std::vector<unsigned long> mask;
  for (int cpu : cpus) {
    const auto word = static_cast<std::size_t>(cpu / kBits);
    if (mask.size() <= word) mask.resize(word + 1, 0UL);
    mask[word] |= 1UL << (cpu % kBits);
  }
  return mask;
}

/// Runs in the child between clone and exec: only async-signal-safe calls here.
[[noreturn]] void exec_worker(const ExecPlan& plan) {
  if (plan.terminal_fd >= 0) {
    // A session of its own with its pty as controlling terminal, as a login shell has: the process
    // group the agent signals is the session's, and /dev/tty, job control and SIGWINCH work.
    if (::setsid() < 0 || ::ioctl(plan.terminal_fd, TIOCSCTTY, 0) < 0) {
      fail_in_child(plan, ChildStep::terminal);  // reported as a failed start, like a failed exec
    }
  } else {
    ::setpgid(0, 0);  // own process group: the agent signals the worker and all it spawned at once
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // die with the agent, even when it is SIGKILLed
  if (::getppid() != plan.agent_pid) ::_exit(127);  // the agent died before prctl took effect
  ::dup2(plan.stdin_fd, STDIN_FILENO);
  ::dup2(plan.stdout_fd, STDOUT_FILENO);
  ::dup2(plan.stderr_fd, STDERR_FILENO);
  // The agent ignores SIGPIPE (and SIGTTIN while it reads a terminal) and may block signals; a
  // worker starts with the defaults.
  ::signal(SIGPIPE, SIG_DFL);
  ::signal(SIGTTIN, SIG_DFL);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Like torchrun (Python's close_fds), workers inherit only 0, 1 and 2 (and a warm interpreter its
  // socket to ddprun, as 3). CLOEXEC rather than close keeps the exec-error pipe open until the exec.
  unsigned first_closed = 3U;
  if (plan.control_fd >= 0) {
    if (plan.control_fd == 3) {
      ::fcntl(3, F_SETFD, 0);
    } else {
      ::dup2(plan.control_fd, 3);  // the copy does not close on exec
    }
    first_closed = 4U;
  }
  ::syscall(SYS_close_range, first_closed, ~0U, CLOSE_RANGE_CLOEXEC);
  // The affinity is inherited through exec by the program and every thread it starts, as torchrun's
  // binding of the worker's threads before they run user code.
  if (plan.cpu_mask != nullptr && ::syscall(SYS_sched_setaffinity, 0, plan.cpu_mask_bytes, plan.cpu_mask) != 0) {
    fail_in_child(plan, ChildStep::cpu_binding);
  }
  ::execve(plan.path, plan.argv.data(), plan.envp.data());
  fail_in_child(plan, ChildStep::exec);
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

namespace {

/// The descriptors of one worker's standard streams, the parent's ends and the child's.
struct Streams {
  UniqueFd out_read, out_write;  // pipes: read/write ends; ptys: master/slave
  UniqueFd err_read, err_write;
  UniqueFd in_read, in_write;    // the child's stdin and ddprun's end; in_read empty: /dev/null
  bool pty = false;
};

Streams open_pipes(bool reads_stdin) {
  Streams s;
  Pipe out;
  Pipe err;
  s.out_read = std::move(out.read_end);
  s.out_write = std::move(out.write_end);
  s.err_read = std::move(err.read_end);
  s.err_write = std::move(err.write_end);
  if (reads_stdin) {
    Pipe in;
    s.in_read = std::move(in.read_end);
    s.in_write = std::move(in.write_end);
  }
  return s;
}

Streams open_ptys(bool reads_stdin, const std::optional<winsize>& window) {
  Streams s;
  s.pty = true;
  PtyPair out = open_worker_pty(window);
  PtyPair err = open_worker_pty(window);
  if (reads_stdin) {
    // The worker reads the stdout pty's slave; ddprun writes its master, through a descriptor of
    // its own so that writing and reading are separate events on the loop.
    int dup = ::fcntl(out.master.get(), F_DUPFD_CLOEXEC, 3);
    if (dup < 0) throw std::system_error(errno, std::generic_category());
    s.in_write = UniqueFd(dup);
  }
  s.out_read = std::move(out.master);
  s.out_write = std::move(out.slave);
  s.err_read = std::move(err.master);
  s.err_write = std::move(err.slave);
  return s;
}

}  // namespace

std::vector<std::string> exec_environment(const Environ& env, const std::string& pty_unavailable) {
  std::vector<std::string> entries;
  entries.reserve(env.size() + 1);
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  // Pipes after all (no pty to be had): Python block-buffers on them, as build_worker_env says.
  if (!pty_unavailable.empty() && !env.contains("PYTHONUNBUFFERED")) entries.push_back("PYTHONUNBUFFERED=1");
  return entries;
}

SpawnedWorker spawn_worker(const WorkerSpec& spec, const Environ& env, const SpawnSettings& settings) {
  auto failed = [&](const std::string& reason) {
    return LaunchError("cannot start worker " + std::to_string(spec.local_rank) + " (" + spec.executable +
                       "): " + reason);
  };
  Streams streams;
  std::string pty_unavailable;
  if (spec.terminal != WorkerTerminal::pipes) {
    try {
      streams = open_ptys(spec.reads_stdin, settings.window);
    } catch (const std::system_error& error) {
      pty_unavailable = "cannot open a pseudo-terminal: " + describe_pty_errno(error.code().value());
      if (spec.terminal == WorkerTerminal::pty) throw failed(pty_unavailable + " (--pty on)");
    }
  }
  std::optional<Pipe> exec_error;
  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  try {
    if (!streams.pty) streams = open_pipes(spec.reads_stdin);
    exec_error.emplace();
  } catch (const std::system_error& error) {
    throw failed(describe_start_errno(error.code().value()));
  }
  if (devnull.get() < 0) throw failed("cannot open /dev/null: " + describe_start_errno(errno));
  int child_stdin = devnull.get();
  if (spec.reads_stdin) child_stdin = streams.pty ? streams.out_write.get() : streams.in_read.get();

  std::vector<std::string> env_entries = exec_environment(env, pty_unavailable);
  std::vector<std::string> argv = spec.argv.empty() ? std::vector<std::string>{spec.executable} : spec.argv;
  const std::vector<unsigned long> cpu_mask = cpu_mask_of(spec.cpu_affinity);
  ExecPlan plan{spec.executable.c_str(), {}, {}, ::getpid(), child_stdin, streams.out_write.get(),
                streams.err_write.get(), exec_error->write_end.get(), streams.pty ? streams.out_write.get() : -1,
                settings.control_fd, cpu_mask.empty() ? nullptr : cpu_mask.data(), cpu_mask.size() * sizeof(unsigned long)};
  for (auto& arg : argv) plan.argv.push_back(arg.data());
  plan.argv.push_back(nullptr);
  for (auto& entry : env_entries) plan.envp.push_back(entry.data());
  plan.envp.push_back(nullptr);

  const pid_t pid = clone_process(settings.cgroup_fd);
  if (pid == 0) exec_worker(plan);
  if (pid < 0) {
    const int error = errno;
    // clone3 into a cgroup that was removed says ENOENT (or ENODEV), which reads as a missing program.
    if (settings.cgroup_fd >= 0 && (error == ENOENT || error == ENODEV)) {
      throw failed("the job's cgroup " + cgroup_path_of(settings.cgroup_fd) +
                   " was removed from outside ddprun (" + std::strerror(error) + ")");
    }
    throw failed(describe_start_errno(error));
  }
  // Also from the parent, so the group exists before we ever signal it. Not for a session leader:
  // setsid() fails in a process that already leads a group; its session exists before the exec
  // succeeds, and we wait for that below.
  if (!streams.pty) ::setpgid(pid, pid);
  streams.out_write.reset();
  streams.err_write.reset();
  streams.in_read.reset();
  exec_error->write_end.reset();
  // The exec-error pipe closes on a successful exec; what failed comes through it otherwise.
  ChildFailure failure{};
  ssize_t n = 0;
  while ((n = ::read(exec_error->read_end.get(), &failure, sizeof failure)) < 0 && errno == EINTR) {
  }
  if (n == sizeof failure) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (failure.step == ChildStep::cpu_binding) {
      const CpuSet cpus(spec.cpu_affinity.begin(), spec.cpu_affinity.end());
      throw failed("--numa-binding: cannot bind it to CPUs " + format_cpu_list(cpus) + ": " + std::strerror(failure.error) +
                   " (CPUs offline, or outside this cgroup's cpuset?)");
    }
    throw failed(describe_start_errno(failure.error));
  }
  SpawnedWorker spawned{pid, streams.out_read.release(), streams.err_read.release(), streams.pty,
                        streams.in_write.release(), std::move(pty_unavailable)};
  return spawned;
}

}  // namespace ddprun::launcher

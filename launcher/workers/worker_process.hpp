#pragma once
/// Starting one worker process: its own process group, death with the agent, stdout and stderr
/// on pipes or pseudo-terminals, stdin from ddprun (forwarded) or /dev/null, no inherited descriptors.
///
/// With ptys, a worker gets two: one for stdout (also its stdin when it reads ddprun's, and its
/// controlling terminal, in a session of its own), one for stderr. Open MPI puts stderr on a pipe;
/// ddprun does not, because tqdm, logging colour and `rich` look at isatty(2), and the two streams
/// must stay apart for -r/-t, the failure summary's stderr tail and error files. The price is a
/// second pty per worker (/proc/sys/kernel/pty/max is 4096 by default: 2,000 workers a node).
#include <sys/ioctl.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "launcher/base/environ.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddprun::launcher {

struct SpawnedWorker {
  pid_t pid = -1;         ///< also its process group id
  int stdout_fd = -1;     ///< read end, owned by the caller, close-on-exec
  int stderr_fd = -1;     ///< read end, owned by the caller, close-on-exec
  bool pty = false;       ///< stdout_fd and stderr_fd are pty masters (EIO at their end, not EOF)
  /// Where ddprun writes the worker's stdin: a dup of the stdout pty's master, or a pipe's write
  /// end; owned by the caller, close-on-exec. -1: the worker reads /dev/null.
  int stdin_fd = -1;
  /// Set when the spec asked for a pty if one can be had, and none could: why (pipes were used).
  std::string pty_unavailable;
};

struct SpawnSettings {
  /// A cgroup's directory, open: the worker is created in it (clone3 CLONE_INTO_CGROUP); -1: none.
  int cgroup_fd = -1;
  /// The size of ddprun's terminal, given to each worker pty; none: not a terminal.
  std::optional<winsize> window;
  /// A descriptor the worker gets as its descriptor 3 (a warm interpreter's socket to ddprun,
  /// warm_pool.hpp); -1: none, the worker inherits only 0, 1 and 2.
  int control_fd = -1;
};

/// Forks (or clones into the job's cgroup) and execs `spec.executable` with `spec.argv` (argv[0] as
/// the user typed it, as torchrun passes it) and `env`. Returns once the exec succeeded; throws
/// LaunchError ("cannot start worker N (program): <errno text and what to do>") when it did not;
/// never returns a pid <= 1. A worker with ptys is a session leader (its pid is its session and
/// process group id); without, the leader of a process group in ddprun's session. Must be called from the thread that lives as long as the agent
/// (PR_SET_PDEATHSIG follows the forking thread).
SpawnedWorker spawn_worker(const WorkerSpec& spec, const Environ& env, const SpawnSettings& settings = {});

/// The environment a worker is exec'd with: `env`, plus PYTHONUNBUFFERED=1 (unless set) when it
/// asked for a pty and got pipes (`pty_unavailable` not empty): Python block-buffers on pipes.
std::vector<std::string> exec_environment(const Environ& env, const std::string& pty_unavailable);

}  // namespace ddprun::launcher

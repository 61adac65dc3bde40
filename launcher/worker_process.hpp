#pragma once
/// Starting one worker process: its own process group, death with the agent, stdout and stderr
/// on pipes, stdin from /dev/null, no inherited descriptors.
#include <sys/types.h>

#include "environ.hpp"
#include "worker_spec.hpp"

namespace ddprun::launcher {

struct SpawnedWorker {
  pid_t pid = -1;         ///< also its process group id
  int stdout_fd = -1;     ///< read end, owned by the caller, close-on-exec
  int stderr_fd = -1;     ///< read end, owned by the caller, close-on-exec
};

struct SpawnSettings {
  /// A cgroup's directory, open: the worker is created in it (clone3 CLONE_INTO_CGROUP); -1: none.
  int cgroup_fd = -1;
};

/// Forks (or clones into the job's cgroup) and execs `spec.executable` with `spec.argv` (argv[0] as
/// the user typed it, as torchrun passes it) and `env`. Returns once the exec succeeded; throws
/// LaunchError ("cannot start worker N (program): <errno text and what to do>") when it did not;
/// never returns a pid <= 1. Must be called from the thread that lives as long as the agent
/// (PR_SET_PDEATHSIG follows the forking thread).
SpawnedWorker spawn_worker(const WorkerSpec& spec, const Environ& env, const SpawnSettings& settings = {});

}  // namespace ddprun::launcher

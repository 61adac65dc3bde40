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

/// Forks and execs `spec.executable` with `spec.argv` and `env`. Returns once the exec succeeded;
/// throws LaunchError ("cannot start worker N (program): <errno text and what to do>") when it did
/// not; never returns a pid <= 1. Must be called from
/// the thread that lives as long as the agent (PR_SET_PDEATHSIG follows the forking thread).
SpawnedWorker spawn_worker(const WorkerSpec& spec, const Environ& env);

}  // namespace ddprun::launcher

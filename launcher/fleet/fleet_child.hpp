#pragma once
/// An ssh started by the launching ddprun: its stdin, stdout and stderr are pipes the launcher's
/// loop reads and writes; it runs in a process group of its own, so that the terminal's Ctrl-C
/// reaches the launcher only, which then stops every node in order (ssh would otherwise die at
/// once and leave the remote side to notice).
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "launcher/base/environ.hpp"
#include "launcher/base/unique_fd.hpp"

namespace ddprun::launcher {

struct FleetChild {
  pid_t pid = -1;
  UniqueFd in;   ///< the child's stdin, written by the launcher (non-blocking)
  UniqueFd out;  ///< its stdout, read by the launcher
  UniqueFd err;  ///< its stderr
};

/// posix_spawnp(argv) with `env`, signals at their defaults. Throws LaunchError naming argv[0].
FleetChild spawn_fleet_child(const std::vector<std::string>& argv, const Environ& env);

/// waitpid(pid, WNOHANG): nothing while it runs, else its exit code (128+N for signal N).
std::optional<int> reap_if_exited(pid_t pid);

}  // namespace ddprun::launcher

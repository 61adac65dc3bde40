#pragma once
/// What the live status reads of one started worker: filled by the worker group
/// (WorkerGroup::describe), read by the status monitor (observe/status_monitor.hpp); the one value
/// the two share, so that neither includes the other.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string_view>

namespace ddprun::launcher {

/// What the status monitor reads of one started worker .
struct WorkerView {
  int local_rank = 0;
  pid_t pid = 0;
  bool exited = false;
  int exitcode = 0;           ///< when exited: torchrun's convention (-N: signal N)
  bool stopped_by_us = false; ///< ddprun had sent it a stop signal or SIGKILL before it exited
  /// When its last complete output line (stdout or stderr) arrived; nothing before the first.
  std::optional<std::chrono::steady_clock::time_point> last_line;
  std::string_view progress_file;  ///< its DDPRUN_PROGRESS_FILE (valid while the group lives)
};

}  // namespace ddprun::launcher

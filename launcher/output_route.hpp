#pragma once
/// Where the lines of one worker stream go: the console (with a prefix), a log file, both, or
/// neither. Decided once per worker from -r/-t/--local-ranks-filter; applied to every line.
#include <string>

namespace ddprun::launcher {

struct StreamRoute {
  int console_fd = -1;  ///< 1 or 2; -1 = not shown on the console
  std::string prefix;   ///< put before each console line (may hold colour codes)
  int file_fd = -1;     ///< stdout.log / stderr.log, owned by the route's user; -1 = none
};

struct WorkerRoutes {
  StreamRoute out;
  StreamRoute err;
};

}  // namespace ddprun::launcher

#pragma once
/// LogWriteError: a worker's log file that could not be written, as the worker group reports it
/// (its own header so that the failure record can keep them without knowing the worker group).
#include <string>

namespace ddprun::launcher {

/// A log file that could not be written: its lines went to the console from then on (a filtered
/// file of --duplicate-std*-filters: its lines are still in the log files and on the console).
struct LogWriteError {
  int local_rank = 0;
  std::string path;
  std::string reason;  ///< errno text
  bool filtered = false;  ///< the attempt's filtered_stdout.log / filtered_stderr.log
};

}  // namespace ddprun::launcher

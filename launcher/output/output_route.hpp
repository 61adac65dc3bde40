#pragma once
/// Where the lines of one worker stream go: the console (with a prefix), a log file, both, or
/// neither. Decided once per worker from -r/-t/--local-ranks-filter; applied to every line.
#include <string>
#include <vector>

namespace ddprun::launcher {

class ConsoleWriter;

struct StreamRoute {
  ConsoleWriter* console = nullptr;  ///< ddprun's stdout or stderr; null = not shown on the console
  std::string prefix;                ///< put before each console line (may hold colour codes)
  int file_fd = -1;                  ///< stdout.log / stderr.log, owned by the route's user; -1 = none
  std::string file_path;             ///< the log file's path, for the message when writing it fails
  /// When the log file cannot be written (a full disk), its lines go here instead, so that none is
  /// lost silently: the console the stream would show on, with this prefix when `console` was null.
  ConsoleWriter* fallback = nullptr;
  std::string fallback_prefix;
  /// `--duplicate-std*-filters`: the attempt's filtered_stdout.log / filtered_stderr.log, shared by
  /// the workers of the attempt and owned by the route's user; -1 = none. A line that contains any
  /// of `filters` is written there after `filtered_prefix` (torchrun's tee prefix, never coloured).
  int filtered_fd = -1;
  std::string filtered_path;
  std::vector<std::string> filters;
  std::string filtered_prefix;
};

struct WorkerRoutes {
  StreamRoute out;
  StreamRoute err;
};

}  // namespace ddprun::launcher

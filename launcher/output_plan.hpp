#pragma once
/// Where each of a worker's streams goes, from -r/--redirects, -t/--tee, --local-ranks-filter and
/// --log-line-prefix-template. Pure; the agent opens the files and writes the prefixes.
#include "launcher/cli/launch_config.hpp"

namespace ddprun::launcher {

struct StreamPlan {
  bool to_console = true;
  bool to_file = false;
  bool prefixed = false;
  /// `--duplicate-std*-filters`: its lines that match a filter are copied, prefixed, to the
  /// attempt's filtered file. torchrun copies from the streams it tees to the console: teed, and
  /// not hidden by --local-ranks-filter.
  bool to_filtered_file = false;
};

struct WorkerOutputPlan {
  StreamPlan out;
  StreamPlan err;
};

/// torchrun's rules: a redirected stream goes to its log file only; a teed stream to the file and
/// to the console with a prefix; otherwise to the console as is. ddprun adds: the filter hides a
/// rank's console lines whatever the mode, and an explicit prefix template prefixes every console line.
WorkerOutputPlan plan_output(const LaunchConfig& config, int local_rank);

/// torchrun's tee prefix, e.g. `[default0]:`.
inline constexpr const char* kDefaultPrefixTemplate = "[${role_name}${local_rank}]:";

}  // namespace ddprun::launcher

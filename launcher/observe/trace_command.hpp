#pragma once
/// `ddprun trace EVENTS.jsonl... [-o FILE]`: the event logs of `--events` as one Chrome trace
/// (trace_convert.hpp), for Perfetto (ui.perfetto.dev, "Open trace file") or chrome://tracing.
/// Several logs (one per node) make one timeline; "-" reads stdin. Without -o the trace goes to
/// stdout. Lines that are not events are reported on stderr with their file and line number and
/// left out; the rest is converted. main() dispatches here when the first argument is `trace`,
/// before the launcher's own command line is read.
#include <string>
#include <vector>

namespace ddprun::launcher {

/// Whether `args` (ddprun's arguments) are `trace ...`.
bool is_trace_command(const std::vector<std::string>& args);

/// Runs it; returns the exit status: 0 the trace is written (bad lines, if any, reported), 1 no
/// event could be read. Throws UsageError (a bad option, no input) and LaunchError (a file that
/// cannot be read or written) for main to report.
int run_trace_command(const std::vector<std::string>& args);

}  // namespace ddprun::launcher

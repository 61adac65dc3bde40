#pragma once
/// The job's status in Prometheus' text exposition format (version 0.0.4), what the status
/// endpoint serves on /metrics: per rank its step, rates, CPU, memory, output age, state and
/// straggler flag, and per GPU it sees NVML's values (labels gpu, NVML's index, and uuid); per
/// node its restarts and hangs; and the endpoint's own counters. Pure: a
/// JobStatus in, text out. Names follow Prometheus' conventions (base units, `_total` on
/// counters), so that `promtool check metrics` accepts them.
#include <cstdint>
#include <string>
#include <string_view>

#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

/// What the status endpoint counts about its own clients; exported beside the job's values.
struct EndpointCounters {
  std::uint64_t requests = 0;             ///< requests answered (any status)
  std::uint64_t refused_connections = 0;  ///< closed at accept or evicted: over the connection limit
  std::uint64_t dropped_connections = 0;  ///< closed for a bound: header size, a body, a deadline
};

/// Every metric, each family once with its HELP and TYPE lines, samples labelled by
/// node, host, rank and local_rank. A rank that never reported progress has no step or rate
/// samples, and a GPU value NVML did not give has no sample (absent, not zero). Ends with a newline.
std::string metrics_text(const JobStatus& job, const EndpointCounters& counters);

/// `value` as a label value: backslash, double quote and newline escaped (\\ \" \n).
std::string escape_label_value(std::string_view value);

/// A sample value as Prometheus reads it: the shortest text that reads back as `value`;
/// NaN, +Inf, -Inf spelled as Prometheus spells them.
std::string format_sample_value(double value);

}  // namespace ddprun::launcher

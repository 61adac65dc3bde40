#pragma once
/// What `ddprun status` and `ddprun stacks` print: the job's status as a plain table (one line per
/// rank, every node, nothing cut: it is read in a terminal or piped), and every rank's stacks with
/// the digest first. Pure: values in, text out. Worker-written text is made terminal-safe.
///
///   run 1234 (pid 4242, /tmp/logs/1234_ab12): world size 4, 1 node; restarts 0, hangs 0
///   node 0 (host-a): attempt 0, sampled 0.4s ago
///   rank  node  local    pid  state       step  samples/s  cpu%     rss   out  text
///      0     0      0  41213  running     1204       9.6k   99%   12.3M    0s  epoch 1 loss 0.31
///
/// When a rank has GPUs, a "gpu" column after rss (status_render.hpp's gpu_cell), and under the
/// table each unhealthy GPU once per node with its whole reason, then each node's gpu_note:
///   node 0: GPU 2 (GPU-8932f937-..., bus 00000000:3B:00.0) has fallen off the bus or is inaccessible (...)
///   node 1: gpu: NVML stalled: nvmlDeviceGetUtilizationRates has not returned for 2.0 s
#include <string>
#include <vector>

#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

/// The table for `job`; `now` (unix seconds) dates the samples; `title` names the run in the
/// first line ("run 1234 (pid 4242, /tmp/logs/...)"). Ends with a newline.
std::string format_status_table(const JobStatus& job, double now, const std::string& title);

/// The stacks: the digest's lines, then each rank's threads and frames (innermost first), ranks in
/// order; a rank whose capture failed says why. Ends with a newline.
std::string format_stacks(const std::vector<RankStacks>& ranks, const std::vector<std::string>& digest);

}  // namespace ddprun::launcher

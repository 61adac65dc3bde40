#pragma once
/// The hang rule, pure: from the status monitor's successive samples of one node (job_status.hpp),
/// how long it has been since any rank of the job last did something, and whether that is a hang
/// (--hang-timeout). No I/O, no clock: the samples' own times (NodeStatus::sampled_at) are the clock.
///
/// What counts as a rank doing something, at a sample:
///   - it appeared, or its state changed (started, exited, failed): at the sample's time;
///   - a progress report changed (step, samples or text, DDPRUN_PROGRESS_FILE): at the report's
///     time (sampled_at - progress.age_seconds);
///   - an output line: at the line's time (sampled_at - output_age_seconds);
///   - CPU time, only for a rank that has not reported progress this attempt: more than
///     `cpu_busy_fraction` of one core over the interval since the previous sample.
/// Why CPU counts only for ranks that do not report: a rank waiting in a collective may burn a
/// core while hung (NCCL's proxy and kernels busy-poll; gloo waits in epoll and costs ~nothing),
/// so for a job that reports progress, CPU alone must never hide a hang. A job that neither reports
/// nor prints has nothing but CPU to tell a long computation from a hang; there a hang spent
/// busy-polling is not seen (docs/usage.md: report progress, one call per step, to be sure).
///
/// The job is hung when at least one rank is running and no rank did anything for
/// `timeout_seconds`. A slow job that still does something within the timeout is never hung. The
/// clock starts again with each attempt (a restart), from the first sample that shows it. A hang is
/// reported once (`newly_hung`), and again only after some rank did something in between.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

struct HangRuleSettings {
  double timeout_seconds = 0;     ///< --hang-timeout; 0: never hung (idle_seconds is still computed)
  /// Of one core: CPU above this is activity (non-reporting ranks only). Low, because a busy rank
  /// on a crowded machine may get a small share of a core, while a rank waiting in gloo costs
  /// ~0.05 % (an epoll wake-up every 10 ms) and a sleeping one nothing.
  double cpu_busy_fraction = 0.02;
};

struct HangVerdict {
  double idle_seconds = 0;  ///< since the last thing any rank did this attempt; 0 when none runs
  bool hung = false;        ///< idle_seconds >= timeout (timeout > 0) and some rank runs
  bool newly_hung = false;  ///< hung now, and not hung at the previous sample: report this one
};

class HangRule {
 public:
  explicit HangRule(HangRuleSettings settings) : settings_(settings) {}

  /// Feeds the next sample (sampled_at not before the previous one's) and judges it.
  HangVerdict observe(const NodeStatus& sample);

  const HangRuleSettings& settings() const { return settings_; }

 private:
  struct Seen {
    pid_t pid = 0;
    RankState state = RankState::starting;
    double cpu_seconds = 0;
    bool reported = false;  ///< reported progress this attempt: its CPU no longer counts
    std::int64_t step = 0;
    std::int64_t samples = 0;
    std::string text;
  };

  /// The latest time `rank` shows it did something at this sample, if any.
  std::optional<double> activity(const RankStatus& rank, double now, double interval);

  HangRuleSettings settings_;
  std::optional<int> attempt_;
  double previous_sample_ = 0;
  double last_activity_ = 0;
  bool hung_ = false;
  std::map<int, Seen> ranks_;  ///< by global rank, this attempt
};

}  // namespace ddprun::launcher

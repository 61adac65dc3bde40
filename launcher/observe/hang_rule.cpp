#include "launcher/observe/hang_rule.hpp"

#include <algorithm>

namespace ddprun::launcher {

std::optional<double> HangRule::activity(const RankStatus& rank, double now, double interval) {
  std::optional<double> latest;
  auto at = [&latest](double time) { latest = std::max(latest.value_or(time), time); };

  auto found = ranks_.find(rank.rank);
  const bool new_process = found == ranks_.end() || found->second.pid != rank.pid;
  Seen& seen = ranks_[rank.rank];
  if (new_process) {
    seen = Seen{};
    seen.pid = rank.pid;
    seen.state = rank.state;
    seen.cpu_seconds = rank.cpu_seconds;
    at(now);  // it appeared
  } else if (seen.state != rank.state) {
    seen.state = rank.state;
    at(now);
  }

  if (rank.progress) {
    const ProgressSample& p = *rank.progress;
    const bool changed = !seen.reported || p.step != seen.step || p.samples != seen.samples || p.text != seen.text;
    seen.reported = true;
    seen.step = p.step;
    seen.samples = p.samples;
    seen.text = p.text;
    if (changed) at(std::min(now, now - p.age_seconds));
  }
  if (rank.output_age_seconds >= 0) at(now - rank.output_age_seconds);

  // CPU: only where progress is not reported (a collective may spin while hung; see the header).
  const double cpu_used = rank.cpu_seconds - seen.cpu_seconds;
  seen.cpu_seconds = rank.cpu_seconds;
  if (!new_process && !seen.reported && interval > 0 && cpu_used > settings_.cpu_busy_fraction * interval) at(now);
  return latest;
}

HangVerdict HangRule::observe(const NodeStatus& sample) {
  const double now = sample.sampled_at;
  if (!attempt_ || *attempt_ != sample.attempt) {
    // A new attempt: its workers are new, and the clock starts now.
    attempt_ = sample.attempt;
    ranks_.clear();
    last_activity_ = now;
    previous_sample_ = now;
    hung_ = false;
  }
  const double interval = now - previous_sample_;
  previous_sample_ = now;

  bool running = false;
  for (const RankStatus& rank : sample.ranks) {
    if (rank.state == RankState::running || rank.state == RankState::starting) running = true;
    if (auto time = activity(rank, now, interval)) last_activity_ = std::max(last_activity_, *time);
  }

  HangVerdict verdict;
  if (!running) {
    hung_ = false;
    return verdict;
  }
  verdict.idle_seconds = std::max(0.0, now - last_activity_);
  verdict.hung = settings_.timeout_seconds > 0 && verdict.idle_seconds >= settings_.timeout_seconds;
  verdict.newly_hung = verdict.hung && !hung_;
  hung_ = verdict.hung;
  return verdict;
}

}  // namespace ddprun::launcher

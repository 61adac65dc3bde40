#include "launcher/observe/status_watch.hpp"

#include <algorithm>
#include <cstdio>

#include "launcher/base/unix_time.hpp"
#include "launcher/observe/event_recorder.hpp"
#include "launcher/observe/status_monitor.hpp"
#include "launcher/observe/status_render.hpp"
#include "launcher/output/console_output.hpp"
#include "launcher/output/console_writer.hpp"

namespace ddprun::launcher {
namespace {

/// The monitor's interval: once a second, or as often as --status-interval asks when that is shorter.
std::chrono::milliseconds sample_interval(double status_interval_s) {
  constexpr std::chrono::milliseconds kDefault{1000};
  constexpr std::chrono::milliseconds kShortest{100};
  if (status_interval_s <= 0) return kDefault;
  auto asked = std::chrono::milliseconds(static_cast<long long>(status_interval_s * 1000));
  return std::clamp(asked, kShortest, kDefault);
}

/// Whether `rank` is to be named now: it straggles and was not named since it last caught up.
/// Keeps `named` (the ranks named and not caught up since).
bool newly_named(std::vector<int>& named, int rank, bool straggles) {
  const bool was = std::find(named.begin(), named.end(), rank) != named.end();
  if (!straggles) {
    if (was) std::erase(named, rank);  // caught up: named again should it fall behind again
    return false;
  }
  if (was) return false;
  named.push_back(rank);
  return true;
}

}  // namespace

StatusWatch::StatusWatch(boost::asio::io_context& io, ConsoleWriter& out, StatusWatchSettings settings,
                         const AttemptView& attempt, EventRecorder& events, WorkerSource workers)
    : io_(io), out_(out), settings_(std::move(settings)), attempt_(attempt), events_(events), workers_(std::move(workers)) {
  block_ = settings_.block && out_.live();
  if (settings_.block_insisted && !out_.live()) {
    print_line("warning: --status on: stdout is not a terminal, so there is no status block; "
               "--status-interval SECONDS prints a status line every SECONDS");
  }
  if (!block_ && settings_.interval_s <= 0 && !settings_.samples_wanted) return;
  StatusMonitorSettings monitor_settings;
  monitor_settings.interval = sample_interval(settings_.interval_s);
  next_line_ = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(static_cast<long long>(settings_.interval_s * 1000));
  make_monitor(monitor_settings);
}

StatusWatch::~StatusWatch() = default;

void StatusWatch::add_listener(Listener listener) { listeners_.push_back(std::move(listener)); }

void StatusWatch::make_monitor(const StatusMonitorSettings& settings) {
  monitor_ = std::make_unique<StatusMonitor>(io_, settings, workers_, [this](const NodeStatus& node) { on_sample(node); });
  monitor_->set_warm_source(warm_);
  monitor_->set_gpus(gpu_sampler_, gpu_sight_);
}

void StatusWatch::set_gpus(GpuSampler* sampler, GpuSight sight) {
  gpu_sampler_ = sampler;
  gpu_sight_ = std::move(sight);
  if (monitor_) monitor_->set_gpus(gpu_sampler_, gpu_sight_);
}

void StatusWatch::set_warm_source(std::function<void(std::vector<WarmInterpreter>&)> warm) {
  warm_ = std::move(warm);
  if (monitor_) monitor_->set_warm_source(warm_);
}

const NodeStatus& StatusWatch::latest() const { return monitor_ ? monitor_->latest() : empty_; }

void StatusWatch::attempt_started() {
  attempt_running_ = true;
  if (!monitor_) return;
  StatusAttempt attempt;
  attempt.attempt = attempt_.attempt;
  attempt.restarts = attempt_.restarts;
  attempt.rank_base = attempt_.rank_base;
  attempt.node_rank = attempt_.group_rank;
  attempt.host = settings_.host;
  attempt.local_world_size = settings_.nproc_per_node;
  monitor_->begin_attempt(std::move(attempt));
  stragglers_named_.clear();
  gpu_stragglers_named_.clear();
}

void StatusWatch::attempt_ended() { attempt_running_ = false; }

void StatusWatch::worker_exited(int local_rank, int exitcode, bool stopped_by_us) {
  if (monitor_) monitor_->worker_exited(local_rank, exitcode, stopped_by_us);
}

void StatusWatch::ensure_samples() {
  if (monitor_) {
    // Before the first sample (a second after the workers start), or when the samples have
    // stopped coming, a reader asking now gets one taken now.
    const double sampled_at = monitor_->latest().sampled_at;
    if (attempt_running_ && (sampled_at == 0 || unix_now() - sampled_at > 2)) monitor_->sample_now();
    return;
  }
  make_monitor(StatusMonitorSettings{});  // once a second
  if (attempt_running_) attempt_started();
  monitor_->sample_now();
}

void StatusWatch::on_sample(const NodeStatus& node) {
  show(node);
  note_stragglers(node);
  note_gpu_stragglers(node);
  note_gpu_note(node);
  for (const Listener& listener : listeners_) listener(node);
}

void StatusWatch::show(const NodeStatus& node) {
  if (block_) {
    // Half the terminal at most: the workers' output keeps the rest.
    out_.set_status(render_status_block(node, out_.columns(), out_.rows() / 2, settings_.color));
  }
  const double interval = settings_.interval_s;
  if (interval > 0) {
    const auto now = std::chrono::steady_clock::now();
    // Samples come a little late or early: a line is due within a tenth of a second of its time.
    if (now + std::chrono::milliseconds(100) >= next_line_) {
      print_line(render_status_line(node));
      next_line_ = std::max(next_line_ + std::chrono::milliseconds(static_cast<long long>(interval * 1000)),
                            now + std::chrono::milliseconds(static_cast<long long>(interval * 500)));
    }
  }
}

void StatusWatch::note_stragglers(const NodeStatus& node) {
  for (const RankStatus& rank : node.ranks) {
    if (!newly_named(stragglers_named_, rank.rank, rank.straggler)) continue;
    const double rate = rank.progress ? rank.progress->steps_per_second : 0;
    const double median = monitor_->straggler_median();
    events_.record({.kind = JobEventKind::straggler,
                    .rank = rank.rank,
                    .pid = rank.pid,
                    .detail = {{"steps_per_second", rate}, {"median_steps_per_second", median}}});
    char text[160];
    std::snprintf(text, sizeof text, "rank %d is a straggler: %.3g steps/s, the median of %s ranks is %.3g", rank.rank,
                  rate, monitor_->straggler_median_is_jobs() ? "the job's" : "this node's", median);
    print_line(text);
  }
}

void StatusWatch::note_gpu_stragglers(const NodeStatus& node) {
  for (const RankStatus& rank : node.ranks) {
    if (!newly_named(gpu_stragglers_named_, rank.rank, rank.gpu_straggler)) continue;
    const double utilisation = gpu_utilisation_of(rank).value_or(0);
    const double median = monitor_->gpu_straggler_median();
    events_.record({.kind = JobEventKind::straggler,
                    .rank = rank.rank,
                    .pid = rank.pid,
                    .detail = {{"gpu_utilization_percent", utilisation}, {"median_gpu_utilization_percent", median}}});
    char text[160];
    std::snprintf(text, sizeof text,
                  "rank %d is a GPU straggler: its GPU busy %.0f %% of the time, the median of this node's ranks is %.0f %%",
                  rank.rank, utilisation, median);
    print_line(text);
  }
}

void StatusWatch::note_gpu_note(const NodeStatus& node) {
  // A stall is said when it begins and when it ends, not at every sample in between (its text
  // changes with each: "has not returned for 2.6 s", then 2.8 s).
  if (node.gpu_note.empty() == gpu_note_said_.empty()) return;
  if (!node.gpu_note.empty()) {
    print_line("GPU state: " + node.gpu_note + "; the GPU fields keep their last values");
  } else {
    print_line("GPU state: NVML answers again");
  }
  gpu_note_said_ = node.gpu_note;
}

void StatusWatch::end() {
  if (monitor_) monitor_->stop();
  if (block_) out_.set_status({});
}

}  // namespace ddprun::launcher

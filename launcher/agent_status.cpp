// The Agent's status: the monitor that samples the workers about once a second, the one place each
// sample goes (on_status_sample), and what the console shows of it (the block at the bottom of a
// terminal, --status-interval's lines, a line when a rank becomes a straggler).
#include <algorithm>
#include <chrono>

#include "launcher/agent.hpp"
#include "launcher/agent_support.hpp"
#include "launcher/output/console.hpp"
#include "launcher/observe/job_event.hpp"
#include "launcher/observe/status_monitor.hpp"
#include "launcher/observe/status_render.hpp"
#include "launcher/workers/worker_group.hpp"

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

}  // namespace

bool Agent::status_wanted() const {
  return status_block_ || plan_.config.status_interval_s > 0 || plan_.config.hang_timeout_s > 0 ||
         plan_.config.status_port.has_value();
}

void Agent::start_status() {
  const LaunchConfig& config = plan_.config;
  ConsoleWriter& out = console_->out();
  status_block_ = config.status != StatusMode::off && out.live();
  status_color_ = use_color(plan_.env, out.fd());
  if (config.status == StatusMode::on && !out.live()) {
    print_line("warning: --status on: stdout is not a terminal, so there is no status block; "
               "--status-interval SECONDS prints a status line every SECONDS");
  }
  if (!status_wanted()) return;
  StatusMonitorSettings settings;
  settings.interval = sample_interval(config.status_interval_s);
  next_status_line_ = std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(static_cast<long long>(config.status_interval_s * 1000));
  make_status_monitor(settings);
}

void Agent::make_status_monitor(const StatusMonitorSettings& settings) {
  monitor_ = std::make_unique<StatusMonitor>(
      io_, settings,
      [this](std::vector<WorkerView>& workers) {
        if (group_) group_->describe(workers);
      },
      [this](const NodeStatus& node) { on_status_sample(node); });
}

void Agent::status_attempt_started() {
  if (!monitor_) return;
  StatusAttempt attempt;
  attempt.attempt = attempt_;
  attempt.restarts = state_.restart_count;
  attempt.rank_base = rank_base_;
  attempt.node_rank = group_rank_;
  attempt.host = plan_.hostname;
  attempt.local_world_size = plan_.config.topology.nproc_per_node;
  monitor_->begin_attempt(std::move(attempt));
  stragglers_named_.clear();
}

void Agent::status_worker_exited(const WorkerExit& exit) {
  if (monitor_) monitor_->worker_exited(exit.local_rank, exit.exitcode, exit.stop_signal_sent != 0 || exit.kill_sent);
}

void Agent::on_status_sample(const NodeStatus& node) {
  show_status(node);
  note_stragglers(node);
  watch_for_hang(node);
  board_sample(node);
}

void Agent::show_status(const NodeStatus& node) {
  if (status_block_) {
    ConsoleWriter& out = console_->out();
    // Half the terminal at most: the workers' output keeps the rest.
    out.set_status(render_status_block(node, out.columns(), out.rows() / 2, status_color_));
  }
  const double interval = plan_.config.status_interval_s;
  if (interval > 0) {
    const auto now = std::chrono::steady_clock::now();
    // Samples come a little late or early: a line is due within a tenth of a second of its time.
    if (now + std::chrono::milliseconds(100) >= next_status_line_) {
      print_line(render_status_line(node));
      next_status_line_ = std::max(next_status_line_ + std::chrono::milliseconds(static_cast<long long>(interval * 1000)),
                                   now + std::chrono::milliseconds(static_cast<long long>(interval * 500)));
    }
  }
}

void Agent::note_stragglers(const NodeStatus& node) {
  for (const RankStatus& rank : node.ranks) {
    const bool named = std::find(stragglers_named_.begin(), stragglers_named_.end(), rank.rank) != stragglers_named_.end();
    if (!rank.straggler) {
      if (named) std::erase(stragglers_named_, rank.rank);  // caught up: named again should it fall behind again
      continue;
    }
    if (named) continue;
    stragglers_named_.push_back(rank.rank);
    const double rate = rank.progress ? rank.progress->steps_per_second : 0;
    const double median = monitor_->straggler_median();
    record_event({.kind = JobEventKind::straggler,
                  .rank = rank.rank,
                  .pid = rank.pid,
                  .detail = {{"steps_per_second", rate}, {"median_steps_per_second", median}}});
    char text[160];
    std::snprintf(text, sizeof text, "rank %d is a straggler: %.3g steps/s, the median of %s ranks is %.3g", rank.rank,
                  rate, monitor_->straggler_median_is_jobs() ? "the job's" : "this node's", median);
    print_line(text);
  }
}

void Agent::end_status() {
  if (monitor_) monitor_->stop();
  close_board();  // its store connection too: the store's host waits for its clients to leave
  if (status_block_) console_->out().set_status({});
}

}  // namespace ddprun::launcher

/// The Agent's job events: where they are stamped and handed to the sinks (the event log, the
/// status endpoint's ring), and the rounds' node events, worked out from what the rendezvous layer
/// tells the agent (a decision, a round's end). The calls that record the rest sit where the thing
/// happens (agent.cpp, agent_rounds.cpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "launcher/agent.hpp"
#include "launcher/agent_support.hpp"
#include "launcher/observe/event_log.hpp"
#include "launcher/report/failure_rule.hpp"

namespace ddprun::launcher {
namespace {

double unix_seconds_now() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(since_epoch).count()) / 1e6;
}

bool about_another_node(JobEventKind kind) {
  return kind == JobEventKind::node_joined || kind == JobEventKind::node_lost;
}

nlohmann::json describe_node(const rendezvous::NodeInfo& node) {
  return {{"node", node.id}, {"host", node.host_name}, {"addr", node.addr}, {"nproc", node.nproc}};
}

/// The hang_detected recorded since the last attempt's workers started, if any: what a restart
/// without a failure follows (--hang-action restart).
const JobEvent* hang_of_the_last_attempt(const RecentEvents& recent) {
  const auto& events = recent.events();
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (it->kind == JobEventKind::hang_detected) return &*it;
    if (it->kind == JobEventKind::worker_started) return nullptr;
  }
  return nullptr;
}

}  // namespace

void Agent::record_event(JobEvent event) {
  if (event.time == 0) event.time = unix_seconds_now();
  if (event.node_rank < 0 && !about_another_node(event.kind)) event.node_rank = event_node_rank_;
  recent_events_.record(event);
  for (JobEventSink* sink : event_sinks_) sink->record(event);
}

void Agent::add_event_sink(JobEventSink* sink) { event_sinks_.push_back(sink); }

void Agent::record_round_events(const rendezvous::RoundDecision& decision) {
  auto in_round = [](const rendezvous::RoundDecision& round, const std::string& id) {
    return round.group_rank_of(id) >= 0;
  };
  if (last_round_) {
    for (std::size_t rank = 0; rank < last_round_->nodes.size(); ++rank) {
      const rendezvous::NodeInfo& node = last_round_->nodes[rank];
      if (in_round(decision, node.id)) continue;
      if (std::find(nodes_said_lost_.begin(), nodes_said_lost_.end(), node.id) != nodes_said_lost_.end()) continue;
      JobEvent lost{.kind = JobEventKind::node_lost, .node_rank = static_cast<int>(rank), .detail = describe_node(node)};
      lost.detail["reason"] = "not in round " + std::to_string(decision.round);
      record_event(std::move(lost));
    }
  }
  for (std::size_t rank = 0; rank < decision.nodes.size(); ++rank) {
    const rendezvous::NodeInfo& node = decision.nodes[rank];
    if (last_round_ && in_round(*last_round_, node.id)) continue;
    JobEvent joined{.kind = JobEventKind::node_joined, .node_rank = static_cast<int>(rank), .detail = describe_node(node)};
    joined.detail["round"] = decision.round;
    record_event(std::move(joined));
  }
  last_round_ = decision;
  nodes_said_lost_.clear();
}

void Agent::record_round_end(const rendezvous::RoundEnd& end) {
  using rendezvous::EndKind;
  restart_reason_ = end.message;
  if (end.kind != EndKind::lost && end.kind != EndKind::left) return;
  // This node's own leaving is its job_finished; and a round's end it wrote itself comes back to it.
  if (!last_round_ || end.node == state_.node_id) return;
  const int rank = last_round_->group_rank_of(end.node);
  if (rank < 0) return;
  if (std::find(nodes_said_lost_.begin(), nodes_said_lost_.end(), end.node) != nodes_said_lost_.end()) return;
  nodes_said_lost_.push_back(end.node);
  JobEvent lost{.kind = JobEventKind::node_lost,
                .node_rank = rank,
                .detail = describe_node(last_round_->nodes[static_cast<std::size_t>(rank)])};
  lost.detail["reason"] = end.message;
  lost.detail["how"] = std::string(rendezvous::end_kind_name(end.kind));
  record_event(std::move(lost));
}

void Agent::open_event_log() {
  if (plan_.config.events_file.empty()) return;
  event_log_ = std::make_unique<EventLog>(io_, plan_.config.events_file, [](const std::string& line) { print_line(line); });
  add_event_sink(event_log_.get());
}

void Agent::record_job_started() {
  const LaunchConfig& config = plan_.config;
  if (config.topology.multi_node) {
    event_node_rank_ = config.rendezvous.is_static ? config.topology.node_rank : -1;  // until a round says
  }
  record_event({.kind = JobEventKind::job_started,
                .detail = {{"run_id", config.rdzv_id},
                           {"host", plan_.hostname},
                           {"agent_pid", static_cast<int>(::getpid())},
                           {"nproc", config.topology.nproc_per_node},
                           {"nnodes", std::to_string(config.topology.min_nodes) + ":" +
                                          std::to_string(config.topology.max_nodes)},
                           {"max_restarts", config.max_restarts},
                           {"command", plan_.command.argv}}});
}

void Agent::record_job_finished() {
  // host and agent_pid as job_started has them: a reader pairs the two by agent (a dynamic job's
  // node rank is only known after it started).
  record_event({.kind = JobEventKind::job_finished,
                .detail = {{"exit_status", state_.exit_status},
                           {"restarts", state_.restart_count},
                           {"host", plan_.hostname},
                           {"agent_pid", static_cast<int>(::getpid())}}});
}

void Agent::record_restart() {
  if (!std::exchange(started_a_group_, true)) return;
  JobEvent restart{.kind = JobEventKind::restart, .detail = {{"restart_count", state_.restart_count}}};
  if (plan_.config.topology.multi_node) {
    restart.detail["round"] = attempt_;
    restart.detail["reason"] = restart_reason_;
  } else if (!failures_.empty()) {  // the last attempt's, described before they are cleared
    const WorkerFailure& first = failures_.front();
    restart.detail["reason"] = "rank " + std::to_string(first.rank) + " failed (" + describe_exitcode(first.exitcode) + ")";
  } else if (const JobEvent* hang = hang_of_the_last_attempt(recent_events_)) {
    restart.detail["reason"] = "hang: no rank made progress for " +
                               std::to_string(std::lround(hang->detail.value("idle_seconds", 0.0))) +
                               " s (--hang-action restart)";
  }
  record_event(std::move(restart));
}

void Agent::record_worker_started(int local_rank, pid_t pid) {
  record_event({.kind = JobEventKind::worker_started,
                .rank = rank_base_ + local_rank,
                .pid = pid,
                .detail = {{"local_rank", local_rank}, {"attempt", attempt_}}});
}

void Agent::record_worker_exited(const WorkerExit& exit) {
  JobEvent exited{.kind = JobEventKind::worker_exited,
                  .rank = rank_base_ + exit.local_rank,
                  .pid = exit.pid,
                  .detail = {{"local_rank", exit.local_rank},
                             {"attempt", attempt_},
                             {"exitcode", exit.exitcode},
                             {"description", describe_exitcode(exit.exitcode)},
                             // Whether this exit is a failure of its own, or the end ddprun gave it.
                             {"failed", failed_on_its_own(exit.exitcode, exit.stop_signal_sent, exit.kill_sent)}}};
  if (exit.stop_signal_sent != 0) exited.detail["stop_signal_sent"] = exit.stop_signal_sent;
  record_event(std::move(exited));
}

}  // namespace ddprun::launcher

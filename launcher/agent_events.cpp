/// The Agent's job events: where they are stamped and handed to the sinks (the event log, the
/// status endpoint's ring), and the rounds' node events, worked out from what the rendezvous layer
/// tells the agent (a decision, a round's end). The calls that record the rest sit where the thing
/// happens (agent.cpp, agent_rounds.cpp).
#include <algorithm>
#include <chrono>

#include "launcher/agent.hpp"

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
  if (end.kind == EndKind::failure) restart_reason_ = end.message;
  if (end.kind != EndKind::lost && end.kind != EndKind::left) return;
  if (!last_round_) return;
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

}  // namespace ddprun::launcher

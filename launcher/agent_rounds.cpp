/// The multi-node half of the Agent: rendezvous rounds. NodeRounds does the rounds' I/O (with
/// NodeMembership for the store exchanges); what comes back (a round formed, a round ended, the
/// rendezvous failed, this node has left) is one more supervisor event, like a child's exit. Here
/// the agent applies a round to itself: its ranks, its store, and what it records of the round.
#include "launcher/agent.hpp"
#include "launcher/agent_support.hpp"
#include "launcher/observe/board_link.hpp"
#include "launcher/observe/event_recorder.hpp"
#include "launcher/rounds/node_rounds.hpp"
#include "rendezvous/node_membership.hpp"
#include "rendezvous/store_server.hpp"

namespace ddprun::launcher {

using rendezvous::RoundDecision;
using rendezvous::RoundEnd;

void Agent::start_rendezvous() {
  RoundHandlers handlers;
  handlers.on_round = [this](const RoundDecision& decision) { dispatch(event::RoundFormed{decision}); };
  handlers.on_round_end = [this](int round, const RoundEnd& end) {
    events_->round_ended(end, state_.node_id);
    dispatch(event::RoundEnded{round, end});
  };
  handlers.on_error = [this](const std::string& message, bool told_to_every_node) {
    dispatch(event::RendezvousFailed{message, told_to_every_node});
  };
  handlers.on_left = [this] { dispatch(event::LeaveDone{}); };
  handlers.print = print_line;
  rounds_ = std::make_unique<NodeRounds>(io_, plan_.config, plan_.hostname, std::move(handlers));
  RoundsStarted started = rounds_->start();
  store_ = std::move(started.hosted_store);
  state_.node_id = std::move(started.node_id);
  state_.node_description = std::move(started.node_description);
}

void Agent::enter_round(const RoundDecision& decision) {
  const RoundPlace place = rounds_->enter(decision);
  place_ = place.view;
  master_ = place.master;
  events_->round_formed(decision);
  board_->open(decision.round, static_cast<int>(decision.nodes.size()), rounds_->membership().stores());
  for (const auto& line : describe_round_entry(decision, place, plan_.config.topology.nproc_per_node, plan_.config.verbose)) {
    print_line(line);
  }
}

void Agent::close_round() {
  board_->close();
  rounds_->close(place_.group_rank);
  // The workers' keys of the ended attempt: the next one has its own prefix and never reads them,
  // but a job of many rounds should not keep every round's. This node's workers are gone, and no
  // worker of the next round can start before this node joins it (a static round needs every node).
  if (store_ && plan_.config.rendezvous.agent_worker_store) store_->erase_all_but(kRendezvousKeys);
}

}  // namespace ddprun::launcher

#pragma once
/// The store keys of one job's rendezvous, all under "ddprun/rdzv/<run id>/": one place that names
/// them, so that the protocol and the tests agree. Workers' keys never live here: each round's
/// workers get a store of their own.
#include <string>

namespace ddprun::rendezvous {

class RoundKeys {
 public:
  explicit RoundKeys(const std::string& run_id) : prefix_("ddprun/rdzv/" + run_id + "/") {}

  /// The newest round that may still be open (decimal text); moves forward with COMPARE_SET.
  std::string current_round() const { return prefix_ + "round"; }
  /// The job's shape (job_shape.hpp: backend, --nnodes, --max-restarts, who set it), set by the
  /// hosting agent before anyone connects, else by the first node; the others must match it.
  std::string job_shape() const { return prefix_ + "shape"; }
  /// ADD counter: how many nodes took a join slot in `round`.
  std::string join_count(int round) const { return at(round) + "joins"; }
  /// The NodeInfo of the node in join slot `slot`, or kClosedMarker (see RoundProtocol).
  std::string join_slot(int round, int slot) const { return at(round) + "join/" + std::to_string(slot); }
  /// Static: the NodeInfo of the node that holds --node-rank `rank` in `round`, set once with
  /// COMPARE_SET before it takes a join slot; a second node with that rank is turned away.
  std::string static_rank(int round, int rank) const { return at(round) + "rank/" + std::to_string(rank); }
  /// The RoundDecision, set once with COMPARE_SET by whoever closes the round.
  std::string decision(int round) const { return at(round) + "decision"; }
  /// The RoundEnd, set once with COMPARE_SET by whoever ends the round first.
  std::string end(int round) const { return at(round) + "end"; }
  /// ADD counter: nodes whose workers of `round` all succeeded.
  std::string finished_count(int round) const { return at(round) + "finished"; }
  /// A node's heartbeat counter (decimal text), for as long as its agent lives.
  std::string heartbeat(const std::string& node_id) const { return prefix_ + "heartbeat/" + node_id; }

 private:
  std::string at(int round) const { return prefix_ + std::to_string(round) + "/"; }
  std::string prefix_;
};

/// Set by the agent that hosts a store: the run id of its job, so that a node started with another
/// --rdzv-id is told at once instead of waiting for a round that never forms.
/// Written by the closing node into the first free join slot: a node that took that slot too late
/// finds it there and knows the round closed without it.
inline const char* const kClosedMarker = "closed";

inline const char* const kHostedRunIdKey = "ddprun/host/run_id";

}  // namespace ddprun::rendezvous

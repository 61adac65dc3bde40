#pragma once
/// RoundProtocol: static and dynamic (c10d) rendezvous rounds over a Store (store.hpp), as
/// coroutines on the caller's io_context.
///
/// A round is formed like this (keys in round_keys.hpp, records in round_record.hpp):
///  - a node takes a join slot with ADD on the round's counter and writes its NodeInfo there;
///  - the node whose join completes the round (MAX nodes, or every node expected back after a
///    membership change) closes it at once; when MIN nodes are in (MIN < MAX), the last call runs
///    for last_call_timeout and then any node closes it with whoever joined (the rule, apart from
///    the I/O: round_close_rule.hpp);
///  - closing = COMPARE_SET of the decision (exactly one wins), then the closed marker in the first
///    free join slot, so that a node that took a slot too late knows it is not in the round.
/// Nobody polls: a node waits in the store's WAIT, for the MIN-th join slot while fewer than MIN
/// nodes are in, then for the decision; its own deadlines (end of the last call, the join timeout)
/// bound each wait. Only the closing node reads the others' records: a round of N nodes costs O(N)
/// store operations in all.
///
/// A node that arrives while a round runs ends it with `joined` (scale up) when the round has room,
/// else waits for its end; then it joins the next round. A round that ended with `finished` or
/// `fatal` is closed for good: a late node gets RendezvousClosed naming the job's end.
///
/// Static jobs need every node, each with its own --node-rank: a node claims its rank per round
/// (COMPARE_SET) before it takes a join slot, so a second node with that rank is turned away at
/// once instead of filling a slot; and a node whose shape disagrees fails the forming round, so that
/// the nodes already waiting for it learn why instead of waiting out the timeout.
///
/// Time: every deadline is read from the injected clock (clock.hpp) and handed to the store's waits
/// as a timeout; the protocol never sleeps on its own. A store that follows the same clock
/// (InProcessStore with manual time) lets a test drive every deadline without sleeping.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/clock.hpp"
#include "rendezvous/job_shape.hpp"
#include "rendezvous/join_progress.hpp"
#include "rendezvous/rendezvous_error.hpp"
#include "rendezvous/rendezvous_settings.hpp"
#include "rendezvous/round_keys.hpp"
#include "rendezvous/round_record.hpp"
#include "rendezvous/store.hpp"

namespace ddprun::rendezvous {

/// The round failed every node that joined it: its decision carries the error (a job shape or a
/// --node-rank conflict), and every other node reads the same message from the store; the agent
/// that hosts the store keeps serving it until they have.
struct RoundFailed : RendezvousError {
  using RendezvousError::RendezvousError;
};

class RoundProtocol {
 public:
  /// `store` must outlive this object, and this object every Task it returns (they run on the
  /// store's executor); calls on the store are this object's only I/O. `clock`: where deadlines
  /// read the time (steady_clock when empty). Store operations on keys that exist already get
  /// settings.read_timeout, heartbeat reads settings.heartbeat_timeout.
  RoundProtocol(Store& store, RendezvousSettings settings, ClockFn clock = {});

  /// Checks that the store serves this job (the hosting agent's run id, if one hosts it) and that
  /// `self` has the job's shape (job_shape.hpp), recording it when it is the first; throws
  /// RendezvousError naming both nodes and what differs. In a static job, a node that disagrees
  /// also fails the round being formed, with the same message, for the nodes that wait in it.
  Task<void> check_job(NodeInfo self);

  /// Joins the newest open round as `self` and completes when it closes, with the decision, which
  /// includes `self`. Throws RendezvousError on the join deadline ("joined: A, B; waiting for 1 more
  /// node (MIN 3)") and when another live node holds `self`'s --node-rank ("node rank 1 is taken
  /// by ..."), RoundFailed when the round's decision is an error, RendezvousClosed when the job has
  /// ended, and StoreError when the store fails.
  Task<RoundDecision> join(NodeInfo self);

  /// Ends `round` with `end` unless it has ended already; returns the end that stands (the first).
  Task<RoundEnd> end_round(int round, RoundEnd end);

  /// Completes once `round` has ended, with how; StoreTimeout after `timeout`.
  Task<RoundEnd> wait_end(int round, std::chrono::milliseconds timeout);

  /// Records that this node's workers of the round all succeeded; the last node of the round to do
  /// so ends it with `finished` (the exit barrier: a node that finishes first waits for that end).
  Task<void> mark_finished(RoundDecision decision, NodeInfo self);

  /// Writes this node's heartbeat counter.
  Task<void> beat(std::string node_id, std::int64_t counter);
  /// The heartbeat counters of `node_ids`, in order (-1 for a value that is not a counter, or a key
  /// that is missing: join() creates it, but on a store with leases it vanishes with a dead node).
  Task<std::vector<std::int64_t>> read_beats(std::vector<std::string> node_ids);

  const RoundKeys& keys() const { return keys_; }

  /// While join() waits for nodes, `report` gets where the forming round stands (JoinProgress with
  /// stage joining; elapsed and timeout left for the caller) each time it looks, and it looks at
  /// least every `interval`: one ADD (and, static with at most kNamedRanksUpTo nodes, one CHECK per
  /// node) per interval. Called on join()'s executor.
  void on_join_progress(std::function<void(const JoinProgress&)> report, std::chrono::milliseconds interval);
  /// Static jobs up to this many nodes name the missing node ranks in the progress.
  static constexpr int kNamedRanksUpTo = 32;

 private:
  SteadyTime now() const { return clock_(); }
  /// The timeout that ends at `deadline` (at least 1 ms: a store wait of 0 means forever).
  std::chrono::milliseconds left_until(SteadyTime deadline) const;
  Task<int> current_round();
  /// Moves the current round past `round` (ended); harmless when another node did it first.
  Task<void> advance_past(int round);
  Task<std::optional<RoundDecision>> read_decision(int round);
  Task<std::optional<RoundEnd>> read_end(int round);
  /// Joins `round` (not yet closed); completes when it closes. nullopt: it closed without this node.
  Task<std::optional<RoundDecision>> join_open_round(int round, NodeInfo self, SteadyTime deadline);
  /// The NodeInfo of join slots [0, count), skipping slots whose node died before writing.
  Task<std::vector<NodeInfo>> read_joins(int round, int count);
  /// What the previous round tells about `round`: its restart count, and the ids expected back
  /// (the survivors, a node that asked to join) when it ended by a membership change.
  struct Carried {
    int restart_count = 0;
    std::vector<std::string> expected_ids;
  };
  Task<Carried> carried_into(int round);
  /// Static: takes `self`'s --node-rank in `round`, or throws RendezvousError naming the node that
  /// took it first.
  Task<void> claim_static_rank(int round, NodeInfo self);
  /// Fails the round being formed with `why` (a decision that is an error), waking the nodes that
  /// wait in it; a round that formed already stands. `job`: the shape those nodes run.
  Task<void> fail_forming_round(JobShape job, std::string why);
  /// Closes `round` with `joined` unless another node closed it first; returns the decision that
  /// stands, and puts the closed marker into the first free join slot from `count` on.
  Task<RoundDecision> close(int round, int count, std::vector<NodeInfo> joined, int restart_count);
  /// The message of the join deadline: who joined `round` (of `count` slots), who is missing.
  Task<std::string> join_timeout_message(int round, int count);
  /// Waits, as a late node, until `round` (running, full) ends. Static: throws RendezvousError when
  /// the node of the round that holds `self`'s --node-rank is alive (its heartbeat goes on).
  Task<void> wait_as_late_node(int round, NodeInfo self, SteadyTime deadline);
  [[noreturn]] void throw_closed(int round, const RoundEnd& end);
  /// Tells on_join_progress's callback, if any, that `count` nodes are in `round`.
  Task<void> report_progress(int round, int count);

  Store& store_;
  RendezvousSettings settings_;
  RoundKeys keys_;
  ClockFn clock_;
  std::function<void(const JoinProgress&)> progress_;
  std::chrono::milliseconds progress_interval_{std::chrono::seconds(5)};
};

}  // namespace ddprun::rendezvous

#pragma once
/// The records of a rendezvous round as they are kept in the store: who joined, what the round
/// decided (group ranks, the workers' store), and how it ended. Plain JSON text, no pickle; the
/// rank assignment is a pure function, tested without a store.
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::rendezvous {

/// One agent, as it joins a round.
struct NodeInfo {
  std::string id;         ///< unique per agent process ("<host>-<pid>-<random>")
  std::string host_name;  ///< the machine's name, for messages only (never dialed)
  std::string addr;       ///< the numeric address other nodes and workers dial
  int nproc = 1;          ///< workers on this node
  int store_port = 0;     ///< this node's candidate worker store for the round (held open while joining)
  int probe_port = 0;     ///< the agent's presence port: connect succeeds while the agent lives
  int previous_rank = -1; ///< group rank in the last round this node took part in; -1 = none
  int static_rank = -1;   ///< static rendezvous: --node-rank; -1 = dynamic

  /// "host (addr)", as messages name a node.
  std::string describe() const;
  bool operator==(const NodeInfo&) const = default;
};

/// What a closed round decided. `nodes` is in group-rank order; node 0's worker store serves the
/// round's workers (MASTER_ADDR/PORT). A non-empty `error` fails every node of the round with it.
struct RoundDecision {
  int round = 0;
  int restart_count = 0;  ///< rounds before this one that ended in a worker failure (job-wide)
  std::vector<NodeInfo> nodes;
  std::string error;

  int world_size() const;
  /// The global rank of local rank 0 on the node of `group_rank`.
  int rank_base(int group_rank) const;
  /// The group rank of the node `id`, or -1 when it is not in the round.
  int group_rank_of(std::string_view id) const;
};

/// Why a round ended. Only `failure` uses up a restart; `fatal` and `finished` end the job.
enum class EndKind {
  failure,   ///< a worker failed and restarts are left: every node restarts its workers
  fatal,     ///< a worker failed with no restarts left: the job fails on every node
  lost,      ///< a node stopped heart-beating: the others form the next round without it
  left,      ///< a node was stopped (signal) and said so: as `lost`, without waiting for the timeout
  joined,    ///< a node arrived while the round ran: the next round includes it (scale up)
  finished,  ///< every node's workers succeeded: the job is done
};

struct RoundEnd {
  EndKind kind = EndKind::failure;
  std::string node;     ///< the id of the node it is about (the failed, lost, joined one)
  std::string message;  ///< one line for the other nodes' users
  bool operator==(const RoundEnd&) const = default;
};

std::string_view end_kind_name(EndKind kind);
/// True when the round after one that ended this way counts one more restart.
inline bool uses_a_restart(EndKind kind) { return kind == EndKind::failure; }
/// True when nothing follows: the job is over on every node.
inline bool ends_the_job(EndKind kind) { return kind == EndKind::fatal || kind == EndKind::finished; }

std::string encode_node(const NodeInfo& node);
std::string encode_decision(const RoundDecision& decision);
std::string encode_end(const RoundEnd& end);
/// Decoders throw RendezvousError("malformed <what> in the store: ...") on text another program
/// wrote: the store is shared with workers and may hold anything.
NodeInfo decode_node(std::string_view text);
RoundDecision decode_decision(std::string_view text);
RoundEnd decode_end(std::string_view text);

/// The decision for the nodes that joined `round`, in join order.
/// static: group rank = static_rank; the ranks must be exactly 0..n-1 once each, else `error` names
/// the nodes that claim the same rank.
/// dynamic: a node keeps its previous rank when that rank is below the new node count (of two nodes
/// that claim the same rank, the earlier joiner keeps it); the other nodes fill the free ranks in order of previous rank (new nodes last),
/// then join order. Deterministic: every node that computes it from the same joins gets the same.
RoundDecision decide_round(int round, int restart_count, const std::vector<NodeInfo>& joined, bool is_static);

/// Static: the node of `nodes` that holds `self`'s --node-rank and is another agent (another id),
/// or nullptr. Such a node makes `self` a duplicate, unless it is a dead node `self` replaces.
const NodeInfo* other_holder_of_rank(const std::vector<NodeInfo>& nodes, const NodeInfo& self);

/// "node rank 1 is taken by a (10.0.0.1), which <how>: give each node of the job its own
/// --node-rank", the refusal of a second node started with the same --node-rank.
std::string rank_taken_message(int rank, const NodeInfo& holder, const std::string& how);

}  // namespace ddprun::rendezvous

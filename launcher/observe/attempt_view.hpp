#pragma once
/// AttemptView: where the current attempt stands in the job — the value the agent keeps up to date
/// (a single-node job: rank base 0, one node; a multi-node job: what the last round decided) and
/// the observers read through a const reference, so that none of them keeps a copy that could go
/// stale between a round and the next attempt.
namespace ddprun::launcher {

struct AttemptView {
  int rank_base = 0;         ///< global rank of local rank 0
  int world_size = 1;        ///< every node's workers
  int group_rank = 0;        ///< this node's rank among the nodes (the last round's)
  int group_world_size = 1;  ///< nodes
  int attempt = 0;           ///< the log folder's attempt_<n>: the restart count, or the round (multi-node)
  int restarts = 0;          ///< restarts so far
};

}  // namespace ddprun::launcher

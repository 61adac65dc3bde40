#pragma once
/// JoinProgress: where a node waiting in a rendezvous stands, and the line that tells the user
/// (issue 11, item 10: ddprun was silent for the whole 600 s of a join timeout). Pure.
#include <chrono>
#include <string>
#include <vector>

namespace ddprun::rendezvous {

struct JoinProgress {
  enum class Stage {
    connecting,  ///< the store (node 0's, or the endpoint's) does not answer yet
    joining,     ///< in a forming round: fewer nodes than it needs (or, c10d, the last call)
  };
  Stage stage = Stage::connecting;
  bool is_static = false;
  int joined = 0;     ///< nodes that took a join slot of the forming round
  int min_nodes = 1;  ///< static: min == max == --nnodes
  int max_nodes = 1;
  /// Static: the --node-rank values not yet in the round, when known (empty: not looked up).
  std::vector<int> missing_ranks;
  std::string store;  ///< "host:port", for the connecting stage
  std::chrono::milliseconds elapsed{0};  ///< since this node began to wait
  std::chrono::milliseconds timeout{0};  ///< the whole wait allowed (the join deadline)
};

/// One line (without "ddprun: "), e.g. "waiting for 2 more nodes: 1 of 3 joined, 35 s of 600";
/// static adds "(missing node rank 1, 2)", c10d with MIN < MAX names the range, and with MIN in
/// says "last call". Seconds are whole, rounded down.
std::string describe_join_progress(const JoinProgress& progress);

/// The -v line of a formed round (torchrun prints its rendezvous result with LOGLEVEL=INFO), e.g.
/// "rendezvous round 0: 2 nodes, this node is rank 1, world size 4, master 10.0.0.1:29500".
std::string describe_round_result(int round, int nodes, int group_rank, int world_size, const std::string& master);

}  // namespace ddprun::rendezvous

#pragma once
/// AttemptView: this node's place in the job for the current attempt, as a value the agent's parts
/// are handed (single node: rank base 0, one node).
namespace ddprun::launcher {

struct AttemptView {
  int rank_base = 0;
  int world_size = 1;
  int group_rank = 0;
  int group_world_size = 1;
  int attempt = 0;
  int restarts = 0;
};

}  // namespace ddprun::launcher

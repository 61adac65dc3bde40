// The waiting line and the -v rendezvous result line (issue 11, item 10), by table.
#include "rendezvous/join_progress.hpp"

#include <gtest/gtest.h>

using ddprun::rendezvous::describe_join_progress;
using ddprun::rendezvous::describe_round_result;
using ddprun::rendezvous::JoinProgress;
using namespace std::chrono_literals;

namespace {

JoinProgress joining(bool is_static, int joined, int min, int max, std::vector<int> missing = {}) {
  JoinProgress p;
  p.stage = JoinProgress::Stage::joining;
  p.is_static = is_static;
  p.joined = joined;
  p.min_nodes = min;
  p.max_nodes = max;
  p.missing_ranks = std::move(missing);
  p.elapsed = 35'900ms;
  p.timeout = 600s;
  return p;
}

}  // namespace

TEST(JoinProgress, Lines) {
  JoinProgress connecting;
  connecting.is_static = true;
  connecting.store = "10.0.0.1:29500";
  connecting.elapsed = 5s;
  connecting.timeout = 900s;
  JoinProgress connecting_c10d = connecting;
  connecting_c10d.is_static = false;
  struct Case {
    JoinProgress progress;
    std::string line;
  } cases[] = {
      {joining(true, 1, 3, 3), "waiting for 2 more nodes: 1 of 3 joined, 35 s of 600"},
      {joining(true, 1, 3, 3, {1, 2}), "waiting for 2 more nodes: 1 of 3 joined, 35 s of 600 (missing node ranks 1, 2)"},
      {joining(true, 1, 2, 2, {1}), "waiting for 1 more node: 1 of 2 joined, 35 s of 600 (missing node rank 1)"},
      {joining(true, 0, 2, 2), "waiting for 2 more nodes: 0 of 2 joined, 35 s of 600"},
      {joining(false, 1, 3, 3), "waiting for 2 more nodes: 1 of 3 joined, 35 s of 600"},
      {joining(false, 1, 2, 4), "waiting for 1 more node: 1 of 2 joined (--nnodes=2:4), 35 s of 600"},
      {joining(false, 3, 2, 4), "last call, room for 1 more node: 3 of 4 joined (--nnodes=2:4), 35 s of 600"},
      {connecting, "waiting for the rendezvous store at 10.0.0.1:29500 to answer (node 0 hosts it), 5 s of 900"},
      {connecting_c10d, "waiting for the rendezvous store at 10.0.0.1:29500 to answer, 5 s of 900"},
  };
  for (const auto& c : cases) EXPECT_EQ(describe_join_progress(c.progress), c.line);
}

TEST(JoinProgress, RoundResult) {
  EXPECT_EQ(describe_round_result(0, 2, 1, 4, "10.0.0.1:29500"),
            "rendezvous round 0: 2 nodes, this node is rank 1, world size 4, master 10.0.0.1:29500");
  EXPECT_EQ(describe_round_result(3, 1, 0, 8, "[::1]:29400"),
            "rendezvous round 3: 1 node, this node is rank 0, world size 8, master [::1]:29400");
}

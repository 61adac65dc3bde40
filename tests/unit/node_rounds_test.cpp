// NodeRounds' lines as a node enters a round. Its I/O (hosting the store, probes, the workers'
// store, joining and leaving) is driven by the multi-node tests (tests/multinode), with real agents.
#include "launcher/rounds/node_rounds.hpp"

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

TEST(NodeRounds, TheLinesOfARoundEntered) {
  rendezvous::RoundDecision decision;
  decision.round = 3;
  decision.restart_count = 1;
  RoundPlace place;
  place.view = {.rank_base = 4, .world_size = 8, .group_rank = 1, .group_world_size = 2, .attempt = 3, .restarts = 1};
  place.master = {"10.0.0.1", 29500};
  EXPECT_EQ(describe_round_entry(decision, place, 4, false),
            (std::vector<std::string>{"round 3: 2 node(s), world size 8; this node is group rank 1 with ranks 4-7, "
                                      "restart 1"}));
  decision.restart_count = 0;
  const auto verbose = describe_round_entry(decision, place, 4, true);
  ASSERT_EQ(verbose.size(), 2U);
  EXPECT_EQ(verbose[0], "round 3: 2 node(s), world size 8; this node is group rank 1 with ranks 4-7");
  EXPECT_NE(verbose[1].find("10.0.0.1:29500"), std::string::npos) << verbose[1];
}

}  // namespace
}  // namespace ddprun::launcher

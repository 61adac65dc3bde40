// BoardLink: two nodes' links on one in-process store (rendezvous/in_process_store.hpp, reached
// through a StoreFactory as a TCPStore or etcd would be), on one real loop, each watching a real
// child process: each serves the other's status once both sampled, a stack request of one is
// answered with both nodes' ranks, a hang's gather needs two nodes and an open board, and closing
// the board tells whatever waited on it.
#include "launcher/observe/board_link.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "launcher/observe/stack_capture.hpp"
#include "observer_node.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

using testing_support::ObserverNode;
using testing_support::run_ready;
using testing_support::run_until;
using testing_support::ScratchFolder;
using testing_support::SleepChild;

class Board : public ::testing::Test {
 protected:
  /// Node `group_rank` of two, its one worker (global rank = group rank) a real child.
  std::unique_ptr<ObserverNode> make_node(int group_rank, pid_t worker) {
    AttemptView attempt;
    attempt.rank_base = group_rank;
    attempt.world_size = 2;
    attempt.group_rank = group_rank;
    attempt.group_world_size = 2;
    auto node = std::make_unique<ObserverNode>(io_, dir_.root() / ("node" + std::to_string(group_rank)),
                                               testing_support::ObserverNodeOptions{.attempt = attempt, .workers = {worker}});
    node->status.attempt_started();
    return node;
  }
  rendezvous::StoreFactory stores() { return testing_support::in_process_factory(store_); }

  ScratchFolder dir_{"board_link"};
  // The store is made before the loop and goes after it: coroutines the loop still holds when it
  // goes (a wait of a closed board) reach into the store.
  std::unique_ptr<rendezvous::InProcessStore> store_holder_ = nullptr;
  boost::asio::io_context io_;
  rendezvous::InProcessStore& store_ = make_store();
  SleepChild child0_, child1_;

 private:
  rendezvous::InProcessStore& make_store() {
    store_holder_ = std::make_unique<rendezvous::InProcessStore>(io_.get_executor());
    return *store_holder_;
  }
};

TEST_F(Board, EachNodeServesTheOthersStatusOnceBothSampled) {
  auto node0 = make_node(0, child0_.pid());
  auto node1 = make_node(1, child1_.pid());
  EXPECT_FALSE(node0->board.is_open());
  node0->board.open(0, 2, stores());
  node1->board.open(0, 2, stores());
  EXPECT_TRUE(node0->board.is_open());
  EXPECT_EQ(node0->board.nodes(), 2);
  ASSERT_NE(node0->status.monitor(), nullptr);  // opening the board starts the samples

  auto job_of = [](ObserverNode& node) {
    JobStatus job;
    job.nodes.push_back(node.status.latest());
    node.board.add_nodes(job);
    return job;
  };
  // Each sample publishes the node's status and reads the other's: the monitors' own samples do it.
  ASSERT_TRUE(run_until(io_, [&] { return job_of(*node0).nodes.size() == 2 && job_of(*node1).nodes.size() == 2; }));
  for (ObserverNode* node : {node0.get(), node1.get()}) {
    const JobStatus job = job_of(*node);
    ASSERT_EQ(job.nodes.size(), 2u);
    for (int rank = 0; rank < 2; ++rank) {
      const NodeStatus& seen = job.nodes[static_cast<std::size_t>(rank)];
      EXPECT_EQ(seen.node_rank, rank);
      ASSERT_EQ(seen.ranks.size(), 1u);
      EXPECT_EQ(seen.ranks[0].rank, rank);
      EXPECT_EQ(seen.ranks[0].pid, rank == 0 ? child0_.pid() : child1_.pid());
      EXPECT_EQ(seen.ranks[0].state, RankState::running);
    }
  }

  // Closed, the board adds nobody.
  node0->board.close();
  EXPECT_FALSE(node0->board.is_open());
  EXPECT_EQ(job_of(*node0).nodes.size(), 1u);
}

TEST_F(Board, AStackRequestOfOneNodeGetsBothNodesRanks) {
  if (!find_unwinder() && ::access("/usr/bin/gdb", X_OK) != 0) GTEST_SKIP() << "neither ddprun-unwind nor gdb";
  auto node0 = make_node(0, child0_.pid());
  auto node1 = make_node(1, child1_.pid());
  node0->board.open(0, 2, stores());
  node1->board.open(0, 2, stores());

  std::optional<StacksReply> reply;
  node1->board.stacks([&](StacksReply got) { reply = std::move(got); });
  // Node 0 sees the request at one of its samples, captures its ranks and answers on the board.
  ASSERT_TRUE(run_until(io_, [&] { return reply.has_value(); }));
  EXPECT_EQ(reply->error, "");
  ASSERT_EQ(reply->ranks.size(), 2u);
  EXPECT_EQ(reply->ranks[0].rank, 0);
  EXPECT_EQ(reply->ranks[0].pid, child0_.pid());
  EXPECT_EQ(reply->ranks[1].rank, 1);
  EXPECT_EQ(reply->ranks[1].pid, child1_.pid());
  for (const RankStacks& rank : reply->ranks) EXPECT_FALSE(rank.threads.empty()) << "rank " << rank.rank;
  EXPECT_FALSE(reply->digest.empty());
  for (const std::string& line : reply->digest) EXPECT_EQ(line.find("no answer"), std::string::npos) << line;
}

TEST_F(Board, AHangsGatherNeedsAnOpenBoardOfTwoNodesOrMore) {
  auto node0 = make_node(0, child0_.pid());
  int called = 0;
  auto done = [&](std::optional<StacksReply>) { ++called; };
  EXPECT_FALSE(node0->board.gather_hang_stacks({}, done));  // no board
  node0->board.open(0, 1, stores());
  EXPECT_FALSE(node0->board.gather_hang_stacks({}, done));  // a board of one node
  run_ready(io_);
  EXPECT_EQ(called, 0);
}

TEST_F(Board, ClosingTheBoardTellsWhatWaitedOnIt) {
  auto node0 = make_node(0, child0_.pid());
  node0->board.open(0, 2, stores());  // node 1 never comes: nothing answers
  RankStacks own;
  own.rank = 0;
  own.pid = child0_.pid();
  int gathers_ended = 0;
  std::optional<StacksReply> gathered{StacksReply{}};
  ASSERT_TRUE(node0->board.gather_hang_stacks({own}, [&](std::optional<StacksReply> reply) {
    ++gathers_ended;
    gathered = std::move(reply);
  }));
  std::vector<StacksReply> asked;
  node0->board.stacks([&](StacksReply reply) { asked.push_back(std::move(reply)); });
  node0->board.stacks([&](StacksReply reply) { asked.push_back(std::move(reply)); });
  run_ready(io_);  // the requests are on the board; the answers wait (up to 10 s)
  EXPECT_EQ(gathers_ended, 0);
  EXPECT_TRUE(asked.empty());

  node0->board.close();
  EXPECT_EQ(gathers_ended, 0);  // told on the loop, never inside close()
  ASSERT_TRUE(run_until(io_, [&] { return gathers_ended > 0 && asked.size() == 2; }));
  EXPECT_EQ(gathers_ended, 1);
  EXPECT_FALSE(gathered.has_value());
  for (const StacksReply& reply : asked) {
    EXPECT_EQ(reply.error, "the round ended while the stacks were being gathered; ask again");
    EXPECT_TRUE(reply.ranks.empty());
  }
  // Nothing more comes after (the board's answers, had they come, go nowhere).
  run_ready(io_);
  EXPECT_EQ(gathers_ended, 1);
  EXPECT_EQ(asked.size(), 2u);
}

}  // namespace
}  // namespace ddprun::launcher

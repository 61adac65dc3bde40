// JobBoard against a real StoreServer on loopback: what one agent publishes another reads, the
// latest status wins while the connection is busy, the bounds hold before anything is sent, a
// stack request reaches every node and a node that does not answer is waited for only so long,
// and a destroyed board calls nothing.
#include "rendezvous/job_board.hpp"

#include <gtest/gtest.h>

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it in C++20

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "rendezvous/store_server.hpp"
#include "tests/support/loopback_store.hpp"

namespace ddprun::rendezvous {
namespace {

using namespace std::chrono_literals;

class Board : public ::testing::Test {
 protected:
  void SetUp() override { server_ = testing::start_loopback_store(); }

  JobBoard::Options options(std::size_t max_value_bytes = 1024) const {
    JobBoard::Options board;
    board.store = Endpoint{"127.0.0.1", server_->port()};
    board.run_id = "job";
    board.max_value_bytes = max_value_bytes;
    board.timeout = 5s;
    return board;
  }

  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds bound = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io_.restart();  // an idle board leaves no work: run_for() then stops the context
      io_.run_for(5ms);
    }
    return true;
  }

  boost::asio::io_context io_;
  std::unique_ptr<StoreServer> server_;
};

TEST_F(Board, WhatOneNodePublishesAnotherReadsAndMissingNodesAreEmpty) {
  JobBoard node0(io_, options());
  JobBoard node1(io_, options());
  int published = 0;
  node0.publish_status(3, 0, R"({"node":0})", [&](std::string error) { EXPECT_EQ(error, ""); ++published; });
  node1.publish_status(3, 1, R"({"node":1})", [&](std::string error) { EXPECT_EQ(error, ""); ++published; });
  ASSERT_TRUE(run_until([&] { return published == 2; }));

  std::optional<BoardRead> read;
  node1.read_statuses(3, 3, [&](BoardRead result) { read = std::move(result); });
  ASSERT_TRUE(run_until([&] { return read.has_value(); }));
  EXPECT_EQ(read->error, "");
  ASSERT_EQ(read->entries.size(), 3u);
  EXPECT_EQ(read->entries[0], R"({"node":0})");
  EXPECT_EQ(read->entries[1], R"({"node":1})");
  EXPECT_FALSE(read->entries[2].has_value()) << "node 2 never published";

  read.reset();  // a round's board is its own
  node0.read_statuses(4, 2, [&](BoardRead result) { read = std::move(result); });
  ASSERT_TRUE(run_until([&] { return read.has_value(); }));
  EXPECT_FALSE(read->entries[0].has_value());
}

TEST_F(Board, ALaterStatusReplacesOneNotYetSent) {
  JobBoard board(io_, options());
  std::vector<std::string> outcomes;
  // None is sent before the loop runs: each publish replaces the one before it.
  board.publish_status(0, 0, "first", [&](std::string error) { outcomes.push_back("first:" + error); });
  board.publish_status(0, 0, "second", [&](std::string error) { outcomes.push_back("second:" + error); });
  board.publish_status(0, 0, "third", [&](std::string error) { outcomes.push_back("third:" + error); });
  ASSERT_TRUE(run_until([&] { return outcomes.size() == 3; }));
  EXPECT_EQ(outcomes, (std::vector<std::string>{"first:replaced", "second:replaced", "third:"}));
  std::optional<BoardRead> read;
  board.read_statuses(0, 1, [&](BoardRead result) { read = std::move(result); });
  ASSERT_TRUE(run_until([&] { return read.has_value(); }));
  EXPECT_EQ(read->entries.at(0), "third");
}

TEST_F(Board, AValueOverTheLimitIsRefusedBeforeAnythingIsSent) {
  JobBoard board(io_, options(16));
  std::string error;
  board.publish_status(0, 0, std::string(17, 'x'), [&](std::string e) { error = std::move(e); });
  ASSERT_TRUE(run_until([&] { return !error.empty(); }));
  EXPECT_NE(error.find("17 bytes, over the board's limit of 16"), std::string::npos) << error;
  std::string stacks_error;
  board.publish_stacks(0, 1, 0, std::string(100, 'y'), [&](std::string e) { stacks_error = std::move(e); });
  ASSERT_TRUE(run_until([&] { return !stacks_error.empty(); }));
  EXPECT_EQ(server_->key_count(), 0u) << "nothing reached the store";
}

TEST_F(Board, ReadsBeyondTheBoundAreRefusedAtOnce) {
  JobBoard board(io_, options());
  int answered = 0, refused = 0;
  for (std::size_t i = 0; i < JobBoard::kMaxPendingReads + 1 + 3; ++i) {
    board.read_statuses(0, 2, [&](BoardRead result) { (result.error.empty() ? answered : refused)++; });
  }
  ASSERT_TRUE(run_until([&] { return answered + refused == static_cast<int>(JobBoard::kMaxPendingReads) + 4; }));
  // None runs before the loop does: kMaxPendingReads wait their turn, the rest are refused.
  EXPECT_EQ(answered, static_cast<int>(JobBoard::kMaxPendingReads));
  EXPECT_EQ(refused, 4);
}

TEST_F(Board, AStackRequestReachesEveryNodeAndSilenceIsWaitedForOnlySoLong) {
  JobBoard asking(io_, options());
  JobBoard answering(io_, options());
  std::int64_t request = 0;
  asking.request_stacks(1, [&](std::int64_t number, std::string error) {
    EXPECT_EQ(error, "");
    request = number;
  });
  ASSERT_TRUE(run_until([&] { return request > 0; }));
  EXPECT_EQ(request, 1);

  std::int64_t seen = -1;
  answering.latest_stack_request(1, [&](std::int64_t number, std::string) { seen = number; });
  ASSERT_TRUE(run_until([&] { return seen >= 0; }));
  EXPECT_EQ(seen, 1);
  answering.publish_stacks(1, seen, 1, "node 1's stacks");

  // Node 0 asks and does not answer on the board: the read does not wait for it.
  std::optional<BoardRead> read;
  auto started = std::chrono::steady_clock::now();
  asking.read_stacks(1, request, 2, 0, 5s, [&](BoardRead result) { read = std::move(result); });
  ASSERT_TRUE(run_until([&] { return read.has_value(); }));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s) << "every answer it waits for is there";
  EXPECT_EQ(read->error, "");
  ASSERT_EQ(read->entries.size(), 2u);
  EXPECT_FALSE(read->entries.at(0).has_value());
  EXPECT_EQ(read->entries.at(1), "node 1's stacks");

  // A third node that never answers is waited for only so long.
  read.reset();
  started = std::chrono::steady_clock::now();
  asking.read_stacks(1, request, 3, 0, 300ms, [&](BoardRead result) { read = std::move(result); });
  ASSERT_TRUE(run_until([&] { return read.has_value(); }));
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(read->error, "");
  EXPECT_EQ(read->entries.at(1), "node 1's stacks");
  EXPECT_FALSE(read->entries.at(2).has_value());
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);
}

TEST_F(Board, AGoneStoreFailsTheOperationWithItsAddress) {
  auto board_options = options();
  board_options.timeout = 300ms;
  server_.reset();  // nothing listens there any more
  JobBoard board(io_, board_options);
  std::string error;
  board.publish_status(0, 0, "x", [&](std::string e) { error = std::move(e); });
  ASSERT_TRUE(run_until([&] { return !error.empty(); }));
  EXPECT_NE(error.find("127.0.0.1:" + std::to_string(board_options.store.port)), std::string::npos) << error;
}

TEST_F(Board, ADestroyedBoardCallsNothing) {
  bool called = false;
  {
    JobBoard board(io_, options());
    board.publish_status(0, 0, "x", [&](std::string) { called = true; });
    board.read_statuses(0, 1, [&](BoardRead) { called = true; });
  }
  run_until([] { return false; }, 300ms);
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace ddprun::rendezvous

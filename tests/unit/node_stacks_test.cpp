// NodeStacks on a real loop: a worker's Python hooks with and without ddprun's Python folder, the
// targets a capture attaches to (running ranks with a real pid only, each with its Python stacks
// file in the attempt's worker folder), and a capture of a real process's stacks.
#include "launcher/observe/node_stacks.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "launcher/observe/capture_queue.hpp"
#include "launcher/observe/stack_capture.hpp"
#include "launcher/output/run_logs.hpp"
#include "observer_rig.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using testing_support::run_until;
using testing_support::ScratchFolder;
using testing_support::SleepChild;

RankStatus rank(int global, int local, pid_t pid, RankState state) {
  RankStatus status;
  status.rank = global;
  status.local_rank = local;
  status.pid = pid;
  status.state = state;
  return status;
}

class Stacks : public ::testing::Test {
 protected:
  ScratchFolder dir_{"node_stacks"};
  boost::asio::io_context io_;
  RunLogs logs_{(dir_.root() / "logs").string(), "run"};
  AttemptView attempt_;
};

TEST_F(Stacks, WithoutDdprunsPythonFolderAWorkerGetsNoHooksAndNoTargetAPythonFile) {
  NodeStacks stacks(io_, logs_, attempt_, [] { return std::optional<fs::path>(); });
  EXPECT_FALSE(stacks.python_hooks(logs_.worker_dir(0, 0)));
  NodeStatus node;
  node.ranks.push_back(rank(0, 0, 4242, RankState::running));
  const auto targets = stacks.targets(node);
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_EQ(targets[0].python_stacks_file, "");
}

TEST_F(Stacks, WithDdprunsPythonFolderAWorkerGetsItAndAStacksFileInItsFolder) {
  const fs::path python = dir_.root() / "share/ddprun/python";
  int lookups = 0;
  NodeStacks stacks(io_, logs_, attempt_, [&] {
    ++lookups;
    return std::optional<fs::path>(python);
  });
  const fs::path worker = logs_.worker_dir(1, 3);
  const auto hooks = stacks.python_hooks(worker);
  ASSERT_TRUE(hooks);
  EXPECT_EQ(hooks->python_dir, python.string());
  EXPECT_EQ(hooks->python_stacks_file, (worker / "python_stacks.txt").string());
  EXPECT_EQ(hooks->stacks_signal, stack_dump_signal());
  ASSERT_TRUE(stacks.python_hooks(logs_.worker_dir(1, 4)));
  EXPECT_EQ(lookups, 1);  // looked up once
}

TEST_F(Stacks, TargetsAreTheRunningRanksWithARealPidAndTheirFilesUnderTheAttemptsWorkerFolder) {
  NodeStacks stacks(io_, logs_, attempt_, [&] { return std::optional<fs::path>(dir_.root() / "python"); });
  attempt_.attempt = 2;
  attempt_.group_rank = 1;
  ASSERT_TRUE(stacks.python_hooks(logs_.worker_dir(2, 0)));
  NodeStatus node;
  node.ranks = {rank(8, 0, 4242, RankState::running),  rank(9, 1, 1, RankState::running),
                rank(10, 2, 0, RankState::running),    rank(11, 3, 4243, RankState::starting),
                rank(12, 4, 4244, RankState::exited),  rank(13, 5, 4245, RankState::failed),
                rank(14, 6, 4246, RankState::stopped), rank(15, 7, 4247, RankState::running)};
  const std::vector<StackTarget> targets = stacks.targets(node);
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[0].rank, 8);
  EXPECT_EQ(targets[0].local_rank, 0);
  EXPECT_EQ(targets[0].pid, 4242);
  EXPECT_EQ(targets[0].node_rank, 1);
  EXPECT_EQ(targets[0].python_stacks_file, (logs_.run_dir() / "attempt_2" / "0" / "python_stacks.txt").string());
  EXPECT_EQ(targets[1].rank, 15);
  EXPECT_EQ(targets[1].local_rank, 7);
  EXPECT_EQ(targets[1].python_stacks_file, (logs_.run_dir() / "attempt_2" / "7" / "python_stacks.txt").string());
}

TEST_F(Stacks, CapturesTheStacksOfARealProcess) {
  if (!find_unwinder() && ::access("/usr/bin/gdb", X_OK) != 0) GTEST_SKIP() << "neither ddprun-unwind nor gdb";
  SleepChild child;
  NodeStacks stacks(io_, logs_, attempt_, [] { return std::optional<fs::path>(); });
  NodeStatus node;
  node.ranks = {rank(5, 0, child.pid(), RankState::running), rank(6, 1, 0, RankState::starting)};
  std::optional<std::vector<RankStacks>> captured;
  stacks.capture(node, [&](std::vector<RankStacks> ranks) { captured = std::move(ranks); });
  ASSERT_TRUE(run_until(io_, [&] { return captured.has_value(); }));
  ASSERT_EQ(captured->size(), 1u);  // the rank that is not running is not attached to
  const RankStacks& got = captured->front();
  EXPECT_EQ(got.rank, 5);
  EXPECT_EQ(got.pid, child.pid());
  EXPECT_EQ(got.error, "");
  ASSERT_FALSE(got.threads.empty());
  EXPECT_FALSE(got.threads[0].python);
  EXPECT_FALSE(got.threads[0].frames.empty());
  EXPECT_FALSE(stacks.queue().busy());
}

}  // namespace
}  // namespace ddprun::launcher

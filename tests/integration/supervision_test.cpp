// Watching the worker group: the first failure stops the others, restarts, the grace period.
#include <gtest/gtest.h>
#include <signal.h>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

std::vector<pid_t> wait_for_pids(const TempDir& dir, int count) {
  std::vector<pid_t> pids;
  bool all = eventually([&] {
    for (int rank = 0; rank < count; ++rank) {
      if (!std::filesystem::exists(dir.path() / ("pid_" + std::to_string(rank)))) return false;
    }
    return true;
  });
  EXPECT_TRUE(all) << "workers did not all start";
  for (int rank = 0; rank < count; ++rank) {
    pids.push_back(std::stoi(read_file(dir.path() / ("pid_" + std::to_string(rank)))));
  }
  return pids;
}

}  // namespace

TEST(Supervision, AllWorkersSucceedMeansExitZero) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "4", "/bin/true"});
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.err, "ddprun: warning: Setting OMP_NUM_THREADS environment variable for each process to be 1 "
                         "in default, to avoid your system being overloaded, please further tune the variable for "
                         "optimal performance in your application as needed.\n");
}

TEST(Supervision, OneFailingRankStopsTheOthersWellWithinTheGrace) {
  // The others sleep until stopped; they must go at SIGTERM, long before the 60 s grace.
  auto start = std::chrono::steady_clock::now();
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "4", "--shutdown-timeout", "60",
                                test_worker_binary(), "fail", "2", "7"});
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(outcome.exit_status, 1);
  EXPECT_LT(elapsed, std::chrono::seconds(30)) << "the others were not stopped by SIGTERM";
  EXPECT_NE(outcome.err.find("rank      : 2 (local_rank: 2)"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("exitcode  : 7"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("<NO_OTHER_FAILURES>"), std::string::npos) << outcome.err;
}

TEST(Supervision, WorkerIgnoringSigtermIsKilledAfterTheGrace) {
  TempDir dir;
  Launch launch({"--standalone", "--nproc-per-node", "3", "--shutdown-timeout", "1", test_worker_binary(), "pid",
                 dir.str(), "ignore-stop"});
  auto pids = wait_for_pids(dir, 3);
  launch.send(SIGTERM);
  Outcome outcome = launch.wait(std::chrono::seconds(30));
  EXPECT_EQ(outcome.exit_status, 128 + SIGTERM) << outcome.err;
  for (pid_t pid : pids) EXPECT_FALSE(process_alive(pid)) << pid;
}

TEST(Supervision, RestartsCarryTheRestartCount) {
  TempDir dir;
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "3", "--max-restarts", "2",
                                test_worker_binary(), "restart", dir.str(), "1"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(std::filesystem::exists(dir.path() / ("restart_" + std::to_string(rank) + "_1"))) << rank;
  }
  EXPECT_NE(outcome.err.find("restarting the worker group, restart 1 of 2"), std::string::npos) << outcome.err;
  EXPECT_EQ(outcome.err.find("restart 2 of 2"), std::string::npos) << outcome.err;
}

TEST(Supervision, RestartsRunOutThenTheJobFails) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                                test_worker_binary(), "fail", "0", "5"});
  EXPECT_EQ(outcome.exit_status, 1);
  EXPECT_NE(outcome.err.find("restart 1 of 2"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("restart 2 of 2"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("FAILED"), std::string::npos) << outcome.err;
}

TEST(Supervision, EachAttemptHasItsOwnLogFolder) {
  TempDir logs;
  TempDir dir;
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--log-dir",
                                logs.str(), "--rdzv-id", "ignored-by-standalone", test_worker_binary(), "restart",
                                dir.str(), "0"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  std::vector<std::filesystem::path> runs(std::filesystem::directory_iterator(logs.path()), {});
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_TRUE(std::filesystem::is_directory(runs[0] / "attempt_0" / "1"));
  EXPECT_TRUE(std::filesystem::is_directory(runs[0] / "attempt_1" / "1"));
}

TEST(Supervision, SuccessLeavesNoTemporaryLogFolder) {
  TempDir tmp;
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "/bin/true"}, {{"TMPDIR", tmp.str()}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

// Signals to ddprun: stop the job and exit 128+N; a second Ctrl-C kills at once; SIGUSR1/2 are
// passed on; SIGKILL of ddprun leaves no worker behind.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

std::vector<pid_t> wait_for_pids(const TempDir& dir, int count, const std::string& prefix = "pid_") {
  EXPECT_TRUE(eventually([&] {
    for (int rank = 0; rank < count; ++rank) {
      if (!std::filesystem::exists(dir.path() / (prefix + std::to_string(rank)))) return false;
    }
    return true;
  })) << "workers did not all start";
  std::vector<pid_t> pids;
  for (int rank = 0; rank < count; ++rank) {
    auto text = read_file(dir.path() / (prefix + std::to_string(rank)));
    pids.push_back(text.empty() || prefix != "pid_" ? 0 : std::stoi(text));
  }
  return pids;
}

}  // namespace

class StopSignal : public ::testing::TestWithParam<int> {};

TEST_P(StopSignal, StopsTheWorkersAndExitsWith128PlusN) {
  const int signo = GetParam();
  TempDir dir;
  Launch launch({"--standalone", "--nproc-per-node", "4", test_worker_binary(), "pid", dir.str()});
  auto pids = wait_for_pids(dir, 4);
  launch.send(signo);
  Outcome outcome = launch.wait();
  EXPECT_EQ(outcome.exit_status, 128 + signo);
  for (pid_t pid : pids) EXPECT_FALSE(process_alive(pid)) << pid;
  auto lines = split_lines(outcome.err);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().rfind("ddprun: received SIG", 0), 0U) << outcome.err;
  EXPECT_EQ(outcome.err.find("FAILED"), std::string::npos) << "a requested stop is not a failure";
}

INSTANTIATE_TEST_SUITE_P(HandledSignals, StopSignal, ::testing::Values(SIGINT, SIGTERM, SIGHUP, SIGQUIT));

TEST(Signals, SecondInterruptKillsWithoutWaitingForTheGrace) {
  TempDir dir;
  Launch launch({"--standalone", "--nproc-per-node", "2", "--shutdown-timeout", "120", test_worker_binary(), "pid",
                 dir.str(), "ignore-stop"});
  auto pids = wait_for_pids(dir, 2);
  launch.send(SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(process_alive(pids[0])) << "the first SIGINT must leave the grace period to the workers";
  launch.send(SIGINT);
  Outcome outcome = launch.wait(std::chrono::seconds(30));  // far below the 120 s grace
  EXPECT_EQ(outcome.exit_status, 128 + SIGINT);
  for (pid_t pid : pids) EXPECT_FALSE(process_alive(pid)) << pid;
}

TEST(Signals, Usr1AndUsr2ArePassedOnAndTheJobGoesOn) {
  TempDir dir;
  Launch launch({"--standalone", "--nproc-per-node", "2", test_worker_binary(), "signals", dir.str()});
  wait_for_pids(dir, 2, "ready_");
  launch.send(SIGUSR1);
  ASSERT_TRUE(eventually([&] {
    return read_file(dir.path() / "usr_0") == "1 0" && read_file(dir.path() / "usr_1") == "1 0";
  })) << read_file(dir.path() / "usr_0");
  launch.send(SIGUSR2);
  ASSERT_TRUE(eventually([&] {
    return read_file(dir.path() / "usr_0") == "1 1" && read_file(dir.path() / "usr_1") == "1 1";
  }));
  EXPECT_TRUE(process_alive(launch.pid()));
  launch.send(SIGTERM);  // the workers exit 0 on SIGTERM
  EXPECT_EQ(launch.wait().exit_status, 128 + SIGTERM);
}

TEST(Signals, SigkillOfDdprunLeavesNoWorker) {
  TempDir dir;
  Launch launch({"--standalone", "--nproc-per-node", "4", test_worker_binary(), "pid", dir.str(), "ignore-stop"});
  auto pids = wait_for_pids(dir, 4);
  for (pid_t pid : pids) ASSERT_TRUE(process_alive(pid));
  launch.send(SIGKILL);
  launch.wait();
  // The workers are re-parented to init (or a subreaper) and reaped there; none may keep running.
  EXPECT_TRUE(eventually([&] {
    for (pid_t pid : pids) {
      if (process_alive(pid)) return false;
    }
    return true;
  })) << "a worker outlived ddprun";
}

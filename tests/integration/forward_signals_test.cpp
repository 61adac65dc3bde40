// Item 11 of issue 11: SIGUSR1 reaches each worker exactly once. ddprun passes on the signals of
// --forward-signals (default SIGUSR1,SIGUSR2), except one sent by Slurm's slurmstepd when the
// workers share ddprun's cgroup: Slurm's proctrack/cgroup signals every process of that cgroup,
// workers included. A process named slurmstepd that signals ddprun and the workers plays Slurm.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

constexpr int kWorkers = 2;

void wait_ready(const TempDir& dir) {
  ASSERT_TRUE(eventually([&] {
    for (int rank = 0; rank < kWorkers; ++rank) {
      if (!std::filesystem::exists(dir.path() / ("ready_" + std::to_string(rank)))) return false;
    }
    return true;
  })) << "workers did not all start";
}

/// "USR1 USR2" counts of every worker, as test_worker's `signals` mode records them.
std::string counts(const TempDir& dir) {
  std::string all;
  for (int rank = 0; rank < kWorkers; ++rank) {
    std::string text = read_file(dir.path() / ("usr_" + std::to_string(rank)));
    all += (rank ? "|" : "") + (text.empty() ? std::string("0 0") : text);
  }
  return all;
}

/// Waits for `expected` in every worker, then a while longer: a second delivery must not follow.
void expect_counts(const TempDir& dir, const std::string& per_worker) {
  std::string expected = per_worker;
  for (int rank = 1; rank < kWorkers; ++rank) expected += "|" + per_worker;
  EXPECT_TRUE(eventually([&] { return counts(dir) == expected; }, std::chrono::seconds(10))) << counts(dir);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(counts(dir), expected);
}

/// The workers: ddprun's children running test_worker (the guardian, also a child, runs ddprun).
std::vector<pid_t> worker_pids(pid_t ddprun) {
  std::ifstream children("/proc/" + std::to_string(ddprun) + "/task/" + std::to_string(ddprun) + "/children");
  std::vector<pid_t> pids;
  for (pid_t pid; children >> pid;) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "test_worker") pids.push_back(pid);
  }
  return pids;
}

bool workers_share_cgroup_of(pid_t ddprun, const std::vector<pid_t>& workers) {
  auto cgroup = [](pid_t pid) { return read_file("/proc/" + std::to_string(pid) + "/cgroup"); };
  for (pid_t pid : workers) {
    if (cgroup(pid) != cgroup(ddprun)) return false;
  }
  return true;
}

/// A process named slurmstepd that sends `signo` to each target, in order, and stays (ddprun
/// looks up its sender's name when the signal arrives) until the object goes.
class FakeSlurmstepd {
 public:
  FakeSlurmstepd(const std::vector<pid_t>& targets, int signo) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_NAME, "slurmstepd");
      for (pid_t target : targets) ::kill(target, signo);
      for (;;) ::pause();
    }
  }
  ~FakeSlurmstepd() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  FakeSlurmstepd(const FakeSlurmstepd&) = delete;
  FakeSlurmstepd& operator=(const FakeSlurmstepd&) = delete;

 private:
  pid_t pid_ = -1;
};

Outcome stop(Launch& launch) {
  EXPECT_TRUE(process_alive(launch.pid())) << "ddprun must survive SIGUSR1/SIGUSR2";
  launch.send(SIGTERM);  // the workers exit 0 on SIGTERM
  Outcome outcome = launch.wait();
  EXPECT_EQ(outcome.exit_status, 128 + SIGTERM);
  return outcome;
}

std::vector<std::string> job(const TempDir& dir, std::vector<std::string> flags = {}) {
  std::vector<std::string> args = {"--standalone", "--nproc-per-node", std::to_string(kWorkers)};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {test_worker_binary(), "signals", dir.str()});
  return args;
}

}  // namespace

TEST(ForwardSignals, KillOfDdprunReachesEachWorkerOnce) {
  TempDir dir;
  Launch launch(job(dir));
  wait_ready(dir);
  launch.send(SIGUSR1);
  expect_counts(dir, "1 0");
  stop(launch);
}

TEST(ForwardSignals, SlurmSignallingTheWholeStepReachesEachWorkerOnce) {
  TempDir dir;
  // No job cgroup: the workers share ddprun's cgroup, as in a Slurm step (no cgroup delegation).
  Launch launch(job(dir, {"-v"}), {{"DDPRUN_JOB_CGROUP", "off"}});
  wait_ready(dir);
  std::vector<pid_t> targets = {launch.pid()};
  auto workers = worker_pids(launch.pid());
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kWorkers));
  targets.insert(targets.end(), workers.begin(), workers.end());
  {
    FakeSlurmstepd slurm(targets, SIGUSR1);
    expect_counts(dir, "1 0");  // Slurm's delivery only: ddprun did not add its own
  }
  launch.send(SIGUSR1);  // the user's own kill is still passed on
  expect_counts(dir, "2 0");
  Outcome outcome = stop(launch);
  EXPECT_NE(outcome.err.find(") not passed on: Slurm signals the workers too\n"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: SIGUSR1 from "), std::string::npos) << outcome.err;  // the test's own kill
}

TEST(ForwardSignals, SlurmSignalIsPassedOnToWorkersInTheJobCgroup) {
  TempDir dir;
  Launch launch(job(dir));
  wait_ready(dir);
  auto workers = worker_pids(launch.pid());
  ASSERT_EQ(workers.size(), static_cast<std::size_t>(kWorkers));
  if (workers_share_cgroup_of(launch.pid(), workers)) {
    stop(launch);
    GTEST_SKIP() << "no job cgroup on this machine (cgroup v2 not writable here)";
  }
  // Slurm signals the pids of the step's cgroup, not those of cgroups below it: ddprun only.
  FakeSlurmstepd slurm({launch.pid()}, SIGUSR1);
  expect_counts(dir, "1 0");
  stop(launch);
}

TEST(ForwardSignals, NoneForwardsNothingAndDdprunSurvives) {
  TempDir dir;
  Launch launch(job(dir, {"--forward-signals", "none"}));
  wait_ready(dir);
  launch.send(SIGUSR1);
  launch.send(SIGUSR2);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(counts(dir), "0 0|0 0");
  stop(launch);
}

TEST(ForwardSignals, OnlyTheListedSignalsArePassedOn) {
  TempDir dir;
  Launch launch(job(dir, {"--forward-signals", "SIGUSR2"}));
  wait_ready(dir);
  launch.send(SIGUSR1);
  launch.send(SIGUSR2);
  expect_counts(dir, "0 1");
  stop(launch);
}

// "No orphans, even when ddprun is SIGKILLed": nothing a worker started survives ddprun's death by
// any signal, whatever the generation: a wrapper script's child, a fork fan, a setsid'd helper, a
// child that ignores SIGTERM. With the job cgroup (cgroup v2, root) and without it (the guardian's
// process groups and environment marker), for a single-node and a multi-node agent.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

/// Each worker starts descendants of every kind, writes their pids to DIR/pids_<RANK>, then waits.
std::string worker_script(const std::string& dir) {
  const std::string out = dir + "/pids_$RANK";
  return "trap '' TERM INT HUP; "                                         // the worker ignores stops
         "sleep 1001 & echo $! >> " + out + "; "                          // a plain child
         "sh -c 'sleep 1002 & echo $! >> " + out + "; wait' & "           // a grandchild via a wrapper
         "for i in 1 2 3; do sleep 1003 & echo $! >> " + out + "; done; "  // a fork fan
         "setsid sleep 1004 & echo $! >> " + out + "; "                    // a new session, no group
         "setsid sh -c 'sleep 1005 & echo $! >> " + out + "; wait' & "      // and its child
         "sleep 0.3; echo ready > " + dir + "/ready_$RANK; wait";
}

std::vector<pid_t> recorded_pids(const TempDir& dir, int workers) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < workers; ++rank) {
    for (const auto& line : split_lines(read_file(dir.path() / ("pids_" + std::to_string(rank))))) {
      if (!line.empty()) pids.push_back(std::stoi(line));
    }
  }
  return pids;
}

bool all_ready(const TempDir& dir, int workers) {
  for (int rank = 0; rank < workers; ++rank) {
    if (!std::filesystem::exists(dir.path() / ("ready_" + std::to_string(rank)))) return false;
  }
  return true;
}

struct OrphanCase {
  const char* name;
  bool cgroup;      ///< the job cgroup, or the fallback without it
  bool multi_node;  ///< a c10d agent (rendezvous rounds) rather than the single-node agent
  int signo;        ///< what ends ddprun
};

class NoOrphans : public ::testing::TestWithParam<OrphanCase> {};

TEST_P(NoOrphans, NothingAWorkerStartedSurvivesDdprun) {
  const OrphanCase c = GetParam();
  TempDir dir;
  constexpr int kWorkers = 2;
  std::vector<std::string> args{"--nproc-per-node", std::to_string(kWorkers), "--shutdown-timeout", "2"};
  for (const auto& flag : one_node_job_flags(c.multi_node)) args.push_back(flag);
  for (const std::string& a : {std::string("/bin/sh"), std::string("-c"), worker_script(dir.str())}) args.push_back(a);
  std::map<std::string, std::string> env;
  if (!c.cgroup) env["DDPRUN_JOB_CGROUP"] = "off";
  Launch launch(args, env);
  ASSERT_TRUE(eventually([&] { return all_ready(dir, kWorkers); }, std::chrono::seconds(30))) << "workers not ready";
  auto pids = recorded_pids(dir, kWorkers);
  ASSERT_EQ(pids.size(), kWorkers * 7u);
  for (pid_t pid : pids) ASSERT_TRUE(process_alive(pid)) << pid;

  launch.send(c.signo);
  launch.wait(std::chrono::seconds(60));
  for (pid_t pid : pids) {
    EXPECT_TRUE(eventually([&] { return !process_alive(pid); }, std::chrono::seconds(10)))
        << "pid " << pid << " outlived ddprun (" << read_file("/proc/" + std::to_string(pid) + "/cmdline") << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, NoOrphans,
    ::testing::Values(OrphanCase{"sigkill_cgroup", true, false, SIGKILL},
                      OrphanCase{"sigkill_no_cgroup", false, false, SIGKILL},
                      OrphanCase{"sigkill_multinode", true, true, SIGKILL},
                      OrphanCase{"sigkill_multinode_no_cgroup", false, true, SIGKILL},
                      OrphanCase{"sigterm_cgroup", true, false, SIGTERM},
                      OrphanCase{"sigterm_no_cgroup", false, false, SIGTERM},
                      OrphanCase{"sigsegv_no_cgroup", false, false, SIGSEGV}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace

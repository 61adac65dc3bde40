// Starting workers when the machine runs out (file descriptors) or when there are thousands of
// them: a clear error and exit 1, nothing left behind, no signal to anything outside the job, and
// signals acted on while workers are still starting.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

std::string pid1_recorder_binary() { return PID1_RECORDER_BINARY; }

struct LimitCase {
  const char* name;
  int open_files;
  int workers;
  bool multi_node;  ///< a c10d agent (rendezvous rounds, a fatal round end) rather than the single-node one
};

class OpenFileLimit : public ::testing::TestWithParam<LimitCase> {};

// Boost.Process reports a start that ran out of descriptors as a child with pid -1; kept as a
// worker, it made ddprun signal group -(-1), PID 1, and then wait for it for ever. In a PID
// namespace whose PID 1 records every signal it gets, the job must fail cleanly and PID 1 hear nothing.
TEST_P(OpenFileLimit, FailsWithAClearErrorSignalsNothingOutsideTheJobAndLeavesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for a PID namespace (unshare -p)";
  const LimitCase limit = GetParam();
  TempDir dir;
  const std::string report = dir.str() + "/report";
  std::vector<std::string> argv{"/usr/bin/unshare", "-p", "-f", "--mount-proc", pid1_recorder_binary(), report,
                                "/usr/bin/prlimit",
                                "--nofile=" + std::to_string(limit.open_files) + ":" + std::to_string(limit.open_files),
                                ddprun_binary(), "--nproc-per-node", std::to_string(limit.workers)};
  for (const auto& flag : one_node_job_flags(limit.multi_node)) argv.push_back(flag);
  argv.push_back("/bin/sleep");
  argv.push_back("30");
  Launch launch(Launch::Command{argv});
  Outcome outcome = launch.wait(std::chrono::seconds(60));
  if (outcome.err.find("unshare: ") != std::string::npos) GTEST_SKIP() << "no PID namespace here: " << outcome.err;
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: cannot start worker "), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("Too many open files (the open-file limit is"), std::string::npos) << outcome.err;
  EXPECT_EQ(outcome.err.find("internal error"), std::string::npos) << outcome.err;
  std::string text = read_file(report);
  EXPECT_NE(text.find("signals:\n"), std::string::npos) << "PID 1 was signalled:\n" << text;
  EXPECT_NE(text.find("leftovers:\n"), std::string::npos) << "processes outlived ddprun:\n" << text;
}

INSTANTIATE_TEST_SUITE_P(Limits, OpenFileLimit,
                         ::testing::Values(LimitCase{"nofile40_20_workers", 40, 20, false},
                                           LimitCase{"nofile256_10000_workers", 256, 10000, false},
                                           LimitCase{"nofile64_30_workers_multinode", 64, 30, true}),
                         [](const auto& info) { return std::string(info.param.name); });

// 2,000 workers take seconds to start; a SIGTERM meanwhile must stop the start at once, not after it.
TEST(ManyWorkers, ASignalDuringTheStartIsActedOnAtOnce) {
  const std::string unique = "1234.567";  // sleep's argument, to find the workers
  Launch launch({"--standalone", "--nproc-per-node", "2000", "--shutdown-timeout", "5", "/bin/sleep", unique});
  ASSERT_TRUE(eventually([&] { return processes_with_argument(unique).size() >= 20; }, std::chrono::seconds(30)))
      << "workers did not start";
  auto sent = std::chrono::steady_clock::now();
  launch.send(SIGTERM);
  Outcome outcome = launch.wait(std::chrono::seconds(60));
  auto took = std::chrono::steady_clock::now() - sent;
  EXPECT_EQ(outcome.exit_status, 128 + SIGTERM) << outcome.err;
  // A liveness bound, far above the expected fraction of a second: the old start ran to its end
  // (2,000 workers, over 30 s on this machine) before the signal was looked at.
  EXPECT_LT(took, std::chrono::seconds(15));
  EXPECT_TRUE(eventually([&] { return processes_with_argument(unique).empty(); }, std::chrono::seconds(10)))
      << "workers survived";
}

}  // namespace

// Item 10 of issue 11 (first half): with -v or LOGLEVEL=INFO ddprun prints its launch config,
// where the GPU count came from and each worker's start (pid, command) on stderr; without, none.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

std::vector<std::string> pids_of(const TempDir& dir, int count) {
  std::vector<std::string> pids;
  for (int rank = 0; rank < count; ++rank) pids.push_back(read_file(dir.path() / ("pid_" + std::to_string(rank))));
  return pids;
}

Outcome run_two_workers(const TempDir& dir, std::vector<std::string> flags, const std::map<std::string, std::string>& env) {
  std::vector<std::string> args = {"--master-port", "0", "--nproc-per-node", "2", "--max-restarts", "1"};
  args.insert(args.end(), flags.begin(), flags.end());
  // The worker: a shell script that records its pid and exits (in a file, as ddprun expands `$`
  // in arguments the way torchrun does).
  std::filesystem::path script = dir.path() / "record_pid.sh";
  std::ofstream(script) << "#!/bin/sh\nprintf %s $$ > \"$(dirname \"$0\")/pid_$LOCAL_RANK\"\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  args.insert(args.end(), {"--no-python", "/bin/sh", script.string()});
  return run_ddprun(args, env);
}

void expect_verbose_lines(const Outcome& outcome, const TempDir& dir) {
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  const std::string& err = outcome.err;
  EXPECT_NE(err.find("ddprun: launch config:\n"), std::string::npos) << err;
  EXPECT_NE(err.find("ddprun:   nproc_per_node  : 2\n"), std::string::npos) << err;
  EXPECT_NE(err.find("ddprun:   max_restarts    : 1\n"), std::string::npos) << err;
  EXPECT_TRUE(std::regex_search(err, std::regex("ddprun:   master          : 127\\.0\\.0\\.1:[1-9][0-9]*\n"))) << err;
  EXPECT_NE(err.find("ddprun:   command         : /bin/sh " + dir.str() + "/record_pid.sh\n"), std::string::npos) << err;
  EXPECT_NE(err.find("ddprun: attempt 0: starting 2 workers\n"), std::string::npos) << err;
  auto pids = pids_of(dir, 2);
  for (int rank = 0; rank < 2; ++rank) {
    std::string line = "ddprun: started local rank " + std::to_string(rank) + " (rank " + std::to_string(rank) +
                       "), pid " + pids[static_cast<std::size_t>(rank)] + ": /bin/sh " + dir.str() + "/record_pid.sh\n";
    EXPECT_NE(err.find(line), std::string::npos) << line << "\n" << err;
  }
}

}  // namespace

TEST(Verbose, DashVPrintsConfigAndEachWorkersStart) {
  TempDir dir;
  expect_verbose_lines(run_two_workers(dir, {"-v"}, {}), dir);
}

TEST(Verbose, LoglevelInfoDoesTheSame) {
  TempDir dir;
  expect_verbose_lines(run_two_workers(dir, {}, {{"LOGLEVEL", "INFO"}}), dir);
}

TEST(Verbose, NothingWithoutIt) {
  TempDir dir;
  Outcome outcome = run_two_workers(dir, {}, {{"LOGLEVEL", "WARNING"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.err.find("launch config"), std::string::npos) << outcome.err;
  EXPECT_EQ(outcome.err.find("started local rank"), std::string::npos) << outcome.err;
  EXPECT_EQ(outcome.err.find("attempt 0"), std::string::npos) << outcome.err;
}

TEST(Verbose, SaysWhereTheGpuCountCameFrom) {
  TempDir root;  // a recorded driver: two GPUs
  std::filesystem::create_directories(root.path() / "proc/driver/nvidia/gpus/a");
  std::filesystem::create_directories(root.path() / "proc/driver/nvidia/gpus/b");
  TempDir dir;
  Outcome outcome = run_two_workers(dir, {"-v", "--nproc-per-node", "gpu"}, {{"DDPRUN_TEST_DEVICE_ROOT", root.str()}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun:   gpus            : /proc/driver/nvidia/gpus: 2 GPUs"), std::string::npos)
      << outcome.err;
}

TEST(Verbose, EachRestartStartsItsWorkersAgain) {
  TempDir dir;
  Outcome outcome = run_ddprun({"-v", "--master-port", "0", "--nproc-per-node", "1", "--max-restarts", "2",
                                "--no-python", "/bin/false"});
  EXPECT_NE(outcome.exit_status, 0);
  EXPECT_NE(outcome.err.find("ddprun: attempt 1: starting 1 worker (restart 1 of 2)\n"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: attempt 2: starting 1 worker (restart 2 of 2)\n"), std::string::npos) << outcome.err;
  int starts = 0;
  for (const auto& line : split_lines(outcome.err)) starts += line.rfind("ddprun: started local rank 0 (rank 0), pid ", 0) == 0;
  EXPECT_EQ(starts, 3);
}

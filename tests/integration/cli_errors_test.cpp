// Malformed command lines, through the real binary: one line on stderr, exit status 2, nothing
// started.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "harness.hpp"

using namespace ddprun::testing;

struct BadCommandLine {
  std::vector<std::string> args;
  std::string mentions;  ///< the flag or value the one-line error must name
  std::map<std::string, std::string> env = {};
};

class MalformedCommandLine : public ::testing::TestWithParam<BadCommandLine> {};

TEST_P(MalformedCommandLine, OneLineAndExitTwo) {
  const BadCommandLine& bad = GetParam();
  TempDir dir;
  TempDir not_executable;
  std::vector<std::string> args = bad.args;
  for (auto& a : args) {
    if (a == "WORKER") a = test_worker_binary();
    if (a == "MARKER") a = dir.str();
    if (a == "NOT_EXECUTABLE") {
      a = (not_executable.path() / "not_executable").string();
      std::ofstream(a) << "#!/bin/sh\n";
      std::filesystem::permissions(a, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    }
  }
  Outcome outcome = run_ddprun(args, bad.env);
  EXPECT_EQ(outcome.exit_status, 2) << outcome.err;
  auto lines = split_lines(outcome.err);
  ASSERT_EQ(lines.size(), 1U) << outcome.err;
  EXPECT_EQ(lines[0].rfind("ddprun: error: ", 0), 0U) << lines[0];
  EXPECT_NE(lines[0].find(bad.mentions), std::string::npos) << lines[0];
  EXPECT_EQ(outcome.out, "");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "a worker ran";
}

// Each runs `test_worker env MARKER` when it (wrongly) starts, which the test would see.
INSTANTIATE_TEST_SUITE_P(
    Launcher, MalformedCommandLine,
    ::testing::Values(
        BadCommandLine{{"--nnodes", "3:1", "WORKER", "env", "MARKER"}, "--nnodes"},
        BadCommandLine{{"--nnodes", "0", "WORKER", "env", "MARKER"}, "--nnodes"},
        BadCommandLine{{"--nnodes", "a:b", "WORKER", "env", "MARKER"}, "--nnodes"},
        BadCommandLine{{"--nnodes", "1:2:3", "WORKER", "env", "MARKER"}, "--nnodes"},
        BadCommandLine{{"--nproc-per-node", "lots", "WORKER", "env", "MARKER"}, "--nproc-per-node"},
        BadCommandLine{{"--nproc-per-node", "0", "WORKER", "env", "MARKER"}, "--nproc-per-node"},
        BadCommandLine{{"--nproc-per-node", "-2", "WORKER", "env", "MARKER"}, "--nproc-per-node"},
        BadCommandLine{{"--nproc-per-node", "gpu", "WORKER", "env", "MARKER"}, "gpu", {{"CUDA_VISIBLE_DEVICES", ""}}},
        BadCommandLine{{"--node-rank", "-1", "WORKER", "env", "MARKER"}, "--node-rank"},
        BadCommandLine{{"--master-port", "70000", "WORKER", "env", "MARKER"}, "--master-port"},
        BadCommandLine{{"--master-port", "http", "WORKER", "env", "MARKER"}, "--master-port"},
        BadCommandLine{{"--max-restarts", "-1", "WORKER", "env", "MARKER"}, "--max-restarts"},
        BadCommandLine{{"--monitor-interval", "0", "WORKER", "env", "MARKER"}, "--monitor-interval"},
        BadCommandLine{{"--shutdown-timeout", "soon", "WORKER", "env", "MARKER"}, "--shutdown-timeout"},
        BadCommandLine{{"--rdzv-backend", "zookeeper", "WORKER", "env", "MARKER"}, "--rdzv-backend"},
        BadCommandLine{{"--rdzv-endpoint", "host:port", "WORKER", "env", "MARKER"}, "--rdzv-endpoint"},
        BadCommandLine{{"--rdzv-conf", "join_timeout", "WORKER", "env", "MARKER"}, "--rdzv-conf"},
        BadCommandLine{{"--rdzv-conf", "join_timeout=-5", "WORKER", "env", "MARKER"}, "--rdzv-conf"},
        BadCommandLine{{"-r", "4", "WORKER", "env", "MARKER"}, "-r"},
        BadCommandLine{{"-r", "0:1,x:2", "WORKER", "env", "MARKER"}, "-r"},
        BadCommandLine{{"--tee", "0:1,0:2", "WORKER", "env", "MARKER"}, "--tee"},
        BadCommandLine{{"--local-ranks-filter", "0,a", "WORKER", "env", "MARKER"}, "--local-ranks-filter"},
        BadCommandLine{{"--signals-to-handle", "SIGKILL", "WORKER", "env", "MARKER"}, "--signals-to-handle"},
        BadCommandLine{{"--signals-to-handle", "SIGNOPE", "WORKER", "env", "MARKER"}, "--signals-to-handle"},
        BadCommandLine{{"-m", "--no-python", "WORKER", "env", "MARKER"}, "--no-python"},
        BadCommandLine{{"--nproc-per-node", "2"}, "PROGRAM"},
        BadCommandLine{{"/nonexistent/trainer", "MARKER"}, "/nonexistent/trainer"},
        BadCommandLine{{"--no-python", "NOT_EXECUTABLE", "MARKER"}, "not_executable"},
        BadCommandLine{{"--frobnicate", "WORKER", "env", "MARKER"}, "--frobnicate"},
        BadCommandLine{{"--devices-per-worker", "-1", "WORKER", "env", "MARKER"}, "--devices-per-worker"},
        BadCommandLine{{"--log-line-prefix-template", "${nope}", "WORKER", "env", "MARKER"},
                       "--log-line-prefix-template"},
        BadCommandLine{{"WORKER", "env", "MARKER"}, "PET_NPROC_PER_NODE", {{"PET_NPROC_PER_NODE", "many"}}},
        BadCommandLine{{"--nnodes", "2", "--rdzv-conf", "keep_alive_interval=0", "WORKER", "env", "MARKER"},
                       "keep_alive_interval"},
        BadCommandLine{{"--nnodes", "2", "--rdzv-backend", "c10d", "WORKER", "env", "MARKER"}, "--rdzv-endpoint"},
        BadCommandLine{{"WORKER", "env", "MARKER"}, "DDPRUN_STORE_TOKEN is set but empty", {{"DDPRUN_STORE_TOKEN", ""}}},
        BadCommandLine{{"--nnodes", "2", "WORKER", "env", "MARKER"},
                       "DDPRUN_STORE_TOKEN_FILE",
                       {{"DDPRUN_STORE_TOKEN_FILE", "/nonexistent/ddprun-token"}}}));

TEST(CommandLine, HelpReadsWellAndExitsZero) {
  Outcome outcome = run_ddprun({"--help"});
  EXPECT_EQ(outcome.exit_status, 0);
  for (const char* flag : {"--nproc-per-node", "--nnodes", "--max-restarts", "--tee", "--redirects",
                           "--standalone", "--rdzv-endpoint", "--devices-per-worker", "--no-python"}) {
    EXPECT_NE(outcome.out.find(flag), std::string::npos) << flag;
  }
}

TEST(CommandLine, ArgumentsAfterTheProgramAreTheWorkers) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc_per_node=1", test_worker_binary(), "echo", "--nnodes",
                                "0", "-m", "--help"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.out, "--nnodes\n0\n-m\n--help\n");
}

// The Agent driven in this process, without the ddprun binary: an AgentPlan made as main.cpp makes
// it (the command line through the CLI parser, the program resolved), Agent::run() to the job's end,
// with real worker processes (/bin/sh), as the house asks: no mock of process spawning.
//
// One process per case: ctest runs each case as its own process (gtest_discover_tests), and the
// guardian the Agent forks must be forked before any thread exists, so each case first checks that
// this process has one thread (gtest's main starts none; an Agent that ran before has joined its
// store's thread by the time it is gone, so running the binary by hand passes too).
//
// No fake clock: the Agent's timers are boost::asio::steady_timer on its io_context (the console's
// patience, the rounds' close_timeout) and its parts keep timers of their own (the worker group's
// shutdown grace, the membership's heartbeats, the status monitor's sampling), while what a test
// waits for (a child's exit, SIGCHLD, a pipe's end) comes from the kernel in real time. A fake
// clock would need every one of them to take a clock type or an interface, and could still not
// make a process exit sooner. Workers that exit at once keep these cases fast instead, and none of
// them asserts a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "launcher/agent.hpp"
#include "launcher/base/own_executable.hpp"
#include "launcher/cli/cli.hpp"
#include "launcher/cli/program.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

using testing_support::ScratchFolder;

int thread_count() {
  int threads = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) ++threads;
  return threads;
}

/// The job `args` describe, run by an Agent in this process; its exit status.
int run_agent(const std::vector<std::string>& args) {
  Environ env = current_environ();
  CommandLine command_line = parse_command_line(args, env, read_host_facts(env));
  LaunchConfig& config = std::get<LaunchConfig>(command_line);
  WorkerCommand command = resolve_program(config, env, own_executable_dir());
  Agent agent(AgentPlan{std::move(config), std::move(command), std::move(env), "agent-test-host"});
  return agent.run();
}

std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::vector<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The one run folder ddprun made under `log_dir` (<run_id>_<random>).
std::filesystem::path run_folder(const std::filesystem::path& log_dir) {
  std::vector<std::filesystem::path> runs(std::filesystem::directory_iterator(log_dir), {});
  EXPECT_EQ(runs.size(), 1U);
  return runs.empty() ? log_dir : runs.front();
}

int events_named(const std::filesystem::path& events, const std::string& name) {
  const std::string field = "\"event\":\"" + name + "\"";
  int count = 0;
  for (const auto& line : lines_of(events)) count += line.find(field) != std::string::npos ? 1 : 0;
  return count;
}

class AgentRun : public ::testing::Test {
 protected:
  void SetUp() override {
    // The guardian is forked as run() starts: this process must have no other thread by then.
    ASSERT_EQ(thread_count(), 1) << "the Agent must start in a process of one thread (run each case on its own)";
  }
};

TEST_F(AgentRun, AFailingJobRestartsOnceThenFails) {
  ScratchFolder scratch("agent_test");
  const auto logs = scratch.root() / "logs";
  const auto starts = scratch.root() / "starts";
  const auto events = scratch.root() / "events.jsonl";
  std::filesystem::create_directories(logs);
  // Each worker says it started, waits (10 s at most) until both of its attempt did, and fails:
  // the first failure stops the group, so a worker must not fail before the other has started.
  const std::string worker =
      "echo \"$RANK $TORCHELASTIC_RESTART_COUNT\" >> '" + starts.string() + "'; i=0; "
      "while [ \"$(grep -c \" $TORCHELASTIC_RESTART_COUNT\\$\" '" + starts.string() + "')\" -lt 2 ] && [ $i -lt 1000 ]; "
      "do sleep 0.01; i=$((i+1)); done; exit 3";
  const int status = run_agent({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--stdin", "none",
                                "--log-dir", logs.string(), "--events", events.string(), "/bin/sh", "-c", worker});
  EXPECT_EQ(status, 1);  // the job failed: a worker failed with no restarts left

  // Each worker started twice, the second time with one restart counted.
  std::vector<std::string> started = lines_of(starts);
  std::sort(started.begin(), started.end());
  EXPECT_EQ(started, (std::vector<std::string>{"0 0", "0 1", "1 0", "1 1"}));
  EXPECT_EQ(events_named(events, "restart"), 1);
  EXPECT_EQ(events_named(events, "worker_exited"), 4);
  EXPECT_EQ(events_named(events, "job_finished"), 1);

  // One log folder per attempt, each with a folder per worker.
  const auto run = run_folder(logs);
  for (const char* attempt : {"attempt_0", "attempt_1"}) {
    for (const char* local_rank : {"0", "1"}) {
      EXPECT_TRUE(std::filesystem::is_directory(run / attempt / local_rank)) << attempt << "/" << local_rank;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(run / "attempt_2"));
}

TEST_F(AgentRun, ASucceedingJobEndsWithoutARestart) {
  ScratchFolder scratch("agent_test");
  const auto logs = scratch.root() / "logs";
  const auto events = scratch.root() / "events.jsonl";
  std::filesystem::create_directories(logs);
  const int status = run_agent({"--standalone", "--nproc-per-node", "2", "--max-restarts", "3", "--stdin", "none",
                                "--log-dir", logs.string(), "--events", events.string(), "/bin/sh", "-c", "exit 0"});
  EXPECT_EQ(status, 0);
  EXPECT_EQ(events_named(events, "restart"), 0);
  EXPECT_EQ(events_named(events, "worker_started"), 2);
  const auto run = run_folder(logs);
  EXPECT_TRUE(std::filesystem::is_directory(run / "attempt_0"));
  EXPECT_FALSE(std::filesystem::exists(run / "attempt_1"));
}

}  // namespace
}  // namespace ddprun::launcher

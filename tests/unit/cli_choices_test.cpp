// parse_command_line: the word-valued options of issue 11 (--pty, --stdin, --worker-store,
// --append-local-rank, --start-method, --forward-signals) and -v/LOGLEVEL, by table.
#include <gtest/gtest.h>

#include <csignal>

#include "cli_parse.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

/// `args` with a program after them.
LaunchConfig parsed(Args args, const Environ& env = kNoPath) {
  args.push_back("t.py");
  return parse(args, env);
}

std::string refusal(Args args) {
  args.push_back("t.py");
  return usage_error(args);
}

TEST(CliChoices, DefaultsAreTheDropInBehaviour) {
  LaunchConfig c = parsed({});
  EXPECT_EQ(c.pty, PtyMode::automatic);
  EXPECT_EQ(c.stdin_target, StdinTarget::rank0);
  EXPECT_EQ(c.worker_store, WorkerStore::agent);
  EXPECT_EQ(c.append_local_rank, LocalRankArg::off);
  EXPECT_EQ(c.start_method, "spawn");
  EXPECT_EQ(c.signals_to_forward, (std::vector<int>{SIGUSR1, SIGUSR2}));
  EXPECT_FALSE(c.verbose);
  EXPECT_FALSE(c.use_env);
}

TEST(CliChoices, EachWordSetsItsValue) {
  EXPECT_EQ(parsed({"--pty", "on"}).pty, PtyMode::on);
  EXPECT_EQ(parsed({"--pty=off"}).pty, PtyMode::off);
  EXPECT_EQ(parsed({"--pty", "auto"}).pty, PtyMode::automatic);
  EXPECT_EQ(parsed({"--stdin", "none"}).stdin_target, StdinTarget::none);
  EXPECT_EQ(parsed({"--stdin", "all"}).stdin_target, StdinTarget::all);
  EXPECT_EQ(parsed({"--worker-store", "fresh"}).worker_store, WorkerStore::fresh);
  EXPECT_EQ(parsed({"--worker_store", "agent"}).worker_store, WorkerStore::agent);
  EXPECT_EQ(parsed({"--append-local-rank", "dash"}).append_local_rank, LocalRankArg::dash);
  EXPECT_EQ(parsed({"--append_local_rank=underscore"}).append_local_rank, LocalRankArg::underscore);
  EXPECT_EQ(parsed({"--start_method", "fork"}).start_method, "fork");
  EXPECT_EQ(parsed({"--start-method", "forkserver"}).start_method, "forkserver");
  EXPECT_TRUE(parsed({"--forward-signals", "none"}).signals_to_forward.empty());
  EXPECT_EQ(parsed({"--forward-signals", "SIGUSR2"}).signals_to_forward, std::vector<int>{SIGUSR2});
  EXPECT_TRUE(parsed({"--use_env"}).use_env);
  EXPECT_TRUE(parsed({"-v"}).verbose);
}

TEST(CliChoices, AnUnknownWordIsAUsageErrorListingTheChoices) {
  struct Case {
    Args args;
    std::string message;
  };
  const Case cases[] = {
      {{"--pty", "yes"}, "--pty: \"yes\" is not one of auto, on, off"},
      {{"--stdin", "rank1"}, "--stdin: \"rank1\" is not one of none, rank0, all"},
      {{"--worker-store", "x"}, "--worker-store: \"x\" is not one of agent, fresh"},
      {{"--append-local-rank", "1"}, "--append-local-rank: \"1\" is not one of off, dash, underscore"},
      {{"--start-method", "thread"}, "--start-method: \"thread\" is not one of fork, spawn, forkserver"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(refusal(c.args).substr(0, c.message.size()), c.message) << c.args[0];
  }
}

TEST(CliChoices, PetVariablesSetThemToo) {
  Environ env{{"PATH", "/nonexistent/ddprun"}, {"PET_PTY", "off"}, {"PET_STDIN", "none"}};
  LaunchConfig c = parsed({}, env);
  EXPECT_EQ(c.pty, PtyMode::off);
  EXPECT_EQ(c.stdin_target, StdinTarget::none);
  EXPECT_EQ(parsed({"--pty", "on"}, env).pty, PtyMode::on);  // the command line wins
}

TEST(CliChoices, LoglevelAsTorchrunReadsIt) {
  struct Case {
    const char* level;
    bool verbose;
  };
  for (const auto& c : {Case{"INFO", true}, Case{"info", true}, Case{"DEBUG", true}, Case{"NOTSET", true},
                        Case{"WARNING", false}, Case{"ERROR", false}, Case{"", false}}) {
    Environ env{{"PATH", "/nonexistent/ddprun"}, {"LOGLEVEL", c.level}};
    EXPECT_EQ(parsed({}, env).verbose, c.verbose) << c.level;
  }
}

}  // namespace
}  // namespace ddprun::launcher

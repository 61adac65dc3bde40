// Worker output: whole lines under heavy parallel output, -r/-t files and layout, prefixes,
// --local-ranks-filter.
#include <gtest/gtest.h>

#include <regex>

#include "harness.hpp"

using namespace ddprun::testing;

TEST(Output, LinesOfParallelWorkersNeverTear) {
  constexpr int kWorkers = 8;
  constexpr int kLines = 5000;
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", std::to_string(kWorkers), test_worker_binary(),
                                "flood", std::to_string(kLines)});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  const std::regex line_shape(R"(rank=(\d) i=(\d+) ([a-z]+) end)");
  std::vector<int> next(kWorkers, 0);
  auto lines = split_lines(outcome.out);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kWorkers * kLines));
  for (const auto& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_shape)) << "torn line: " << line.substr(0, 200);
    int rank = std::stoi(m[1]);
    EXPECT_EQ(std::stoi(m[2]), next[rank]++) << "rank " << rank << " lines out of order";
    EXPECT_EQ(m[3].length(), static_cast<std::size_t>(100 + rank * 7));
  }
}

TEST(Output, TeePrefixesConsoleLinesAndWritesTheLogFiles) {
  TempDir logs;
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--tee", "3", "--log-dir", logs.str(),
                                test_worker_binary(), "echo", "hello"},
                               {{"NO_COLOR", "1"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("[default0]:hello\n"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("[default1]:hello\n"), std::string::npos) << outcome.out;
  auto run = only_run_folder(logs);
  EXPECT_EQ(read_file(run / "attempt_0" / "0" / "stdout.log"), "hello\n");
  EXPECT_EQ(read_file(run / "attempt_0" / "1" / "stdout.log"), "hello\n");
  EXPECT_TRUE(std::filesystem::exists(run / "attempt_0" / "1" / "stderr.log"));
}

TEST(Output, RedirectSendsToFilesOnly) {
  TempDir logs;
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--redirects", "1", "--log-dir",
                                logs.str(), test_worker_binary(), "echo", "quiet"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.out, "");
  auto run = only_run_folder(logs);
  EXPECT_EQ(read_file(run / "attempt_0" / "0" / "stdout.log"), "quiet\n");
  EXPECT_FALSE(std::filesystem::exists(run / "attempt_0" / "0" / "stderr.log"));  // -r 1 is stdout only
}

TEST(Output, PerRankRedirectMap) {
  TempDir logs;
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "-r", "0:1", "--log-dir", logs.str(),
                                test_worker_binary(), "echo", "x"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.out, "x\n");  // rank 1 is not redirected
  auto run = only_run_folder(logs);
  EXPECT_EQ(read_file(run / "attempt_0" / "0" / "stdout.log"), "x\n");
  EXPECT_FALSE(std::filesystem::exists(run / "attempt_0" / "1" / "stdout.log"));
}

TEST(Output, LocalRanksFilterHidesOtherRanksOnTheConsole) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "3", "--tee", "3", "--local-ranks-filter", "1",
                                test_worker_binary(), "echo", "only"},
                               {{"NO_COLOR", "1"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.out, "[default1]:only\n");
}

TEST(Output, PrefixTemplate) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--role", "trainer",
                                "--log-line-prefix-template", "${role_name}/${rank}/${local_rank}> ",
                                test_worker_binary(), "echo", "x"},
                               {{"NO_COLOR", "1"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("trainer/0/0> x\n"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("trainer/1/1> x\n"), std::string::npos) << outcome.out;
}

TEST(Output, ColorOnlyWhenForcedOffATerminal) {
  Outcome plain = run_ddprun({"--standalone", "--tee", "3", test_worker_binary(), "echo", "x"});
  EXPECT_EQ(plain.out, "[default0]:x\n");  // a pipe is not a terminal
  Outcome forced = run_ddprun({"--standalone", "--tee", "3", test_worker_binary(), "echo", "x"},
                              {{"CLICOLOR_FORCE", "1"}});
  EXPECT_NE(forced.out.find("\x1b["), std::string::npos);
  EXPECT_NE(forced.out.find("[default0]:"), std::string::npos);
}

TEST(Output, LastLineWithoutNewlineIsKept) {
  TempDir dir;
  Outcome outcome = run_ddprun({"--standalone", "--no-python", "/bin/sh", "-c", "printf 'no newline'"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.out, "no newline\n");
}

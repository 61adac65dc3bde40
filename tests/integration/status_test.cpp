// Live status (issue 13, item 1 and 3): real jobs whose workers report progress through the worker
// runtime's writer (progress_worker). Not a terminal: --status-interval lines show each rank's step,
// moving on. A rank deliberately slower than the others is named a straggler (a line and a
// straggler event), and nobody else is. On a terminal (tmux, read back with capture-pane): the status
// block at the bottom shows every rank, worker lines above it are whole, and it is gone after the job.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tmux_session.hpp"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

const std::string kProgressWorker = PROGRESS_WORKER_BINARY;

std::vector<std::string> status_lines(const std::string& err) {
  std::vector<std::string> lines;
  for (const auto& line : split_lines(err)) {
    if (line.rfind("ddprun: status: ", 0) == 0) lines.push_back(line);
  }
  return lines;
}

/// The steps "step 0:N 1:N 2:N" of a status line, by rank; -1 for "-".
std::vector<long> steps_of(const std::string& line, int ranks) {
  std::vector<long> steps;
  for (int r = 0; r < ranks; ++r) {
    std::smatch match;
    if (!std::regex_search(line, match, std::regex(" " + std::to_string(r) + ":(-|[0-9]+)"))) return {};
    steps.push_back(match[1] == "-" ? -1 : std::stol(match[1]));
  }
  return steps;
}

TEST(Status, IntervalLinesShowEachRanksStepMovingOn) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "3", "--status-interval", "1", "--no-python",
                                kProgressWorker, "--rate", "50", "--seconds", "5"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  std::vector<std::string> lines = status_lines(outcome.err);
  ASSERT_GE(lines.size(), 3u) << outcome.err;  // about one a second of the five
  EXPECT_LE(lines.size(), 7u) << outcome.err;
  std::vector<long> first = steps_of(lines.front(), 3);
  std::vector<long> last = steps_of(lines.back(), 3);
  ASSERT_EQ(first.size(), 3u) << lines.front();
  ASSERT_EQ(last.size(), 3u) << lines.back();
  for (int r = 0; r < 3; ++r) {
    EXPECT_GT(first[r], 0) << lines.front();
    EXPECT_GT(last[r], first[r]) << lines.front() << "\n" << lines.back();
    EXPECT_LE(last[r], 250) << lines.back();  // 50 steps a second for 5 seconds
  }
  EXPECT_NE(lines.back().find(" running"), std::string::npos) << lines.back();
  EXPECT_NE(lines.back().find(" samples/s"), std::string::npos) << lines.back();
  EXPECT_EQ(outcome.err.find("straggler"), std::string::npos) << outcome.err;  // three alike
}

TEST(Status, NoIntervalNoLines) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--no-python", kProgressWorker, "--rate", "50",
                                "--seconds", "2"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_TRUE(status_lines(outcome.err).empty()) << outcome.err;
}

TEST(Status, ASlowerRankIsNamedAStraggler) {
  TempDir tmp;
  const std::string events = (tmp.path() / "events.jsonl").string();
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "4", "--status-interval", "1", "--events", events,
                                "--no-python", kProgressWorker, "--rate", "100", "--seconds", "14", "--slow-rank", "2",
                                "--slow-factor", "0.4"},
                               {});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: rank 2 is a straggler: "), std::string::npos) << outcome.err;
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(outcome.err.find("rank " + std::to_string(r) + " is a straggler"), std::string::npos) << outcome.err;
  }
  bool in_a_status_line = false;
  for (const auto& line : status_lines(outcome.err)) in_a_status_line |= line.find("stragglers: 2") != std::string::npos;
  EXPECT_TRUE(in_a_status_line) << outcome.err;
  // The event log has it, once, for rank 2.
  std::string log = read_file(events);
  int straggler_events = 0;
  for (const auto& line : split_lines(log)) {
    if (line.find("\"event\":\"straggler\"") == std::string::npos) continue;
    ++straggler_events;
    EXPECT_NE(line.find("\"rank\":2"), std::string::npos) << line;
    EXPECT_NE(line.find("\"median_steps_per_second\""), std::string::npos) << line;
  }
  EXPECT_EQ(straggler_events, 1) << log;
}

/// Every line on `screen` that a worker printed ("[R]:..."), whole: "[R]:rank R step N".
void expect_whole_worker_lines(const std::string& screen) {
  static const std::regex whole(R"(\[([0-9])\]:rank \1 step [0-9]+)");
  for (const auto& raw : split_lines(screen)) {
    std::string line = raw.substr(0, raw.find_last_not_of(' ') + 1);
    if (line.empty() || line[0] != '[') continue;
    EXPECT_TRUE(std::regex_match(line, whole)) << "a torn worker line: '" << line << "'\n" << screen;
  }
}

TEST(Status, TheBlockUnderTmuxShowsEveryRankAndGoesAtTheEnd) {
  if (std::system("tmux -V >/dev/null 2>&1") != 0) GTEST_SKIP() << "tmux is not installed";
  TempDir tmp;
  Tmux tmux("TMPDIR=" + tmp.str() + " NO_COLOR=1 " + ddprun_binary() +
            " --standalone --nproc-per-node 4 '--log-line-prefix-template=[${rank}]:' --no-python " + kProgressWorker +
            " --rate 40 --seconds 8 --print-every 7; echo EXIT=$?; sleep 60");
  ASSERT_TRUE(tmux.started());
  // The block: its title, the header, and a line per rank that shows its step.
  static const std::regex rank_line(R"(^ +([0-3]) (running|straggler) +([0-9]+) .*step [0-9]+ *$)");
  std::string seen;
  ASSERT_TRUE(tmux.wait_for([&](const std::string& screen) {
    seen = screen;
    int ranks = 0;
    for (const auto& line : split_lines(screen)) ranks += std::regex_match(line, rank_line) ? 1 : 0;
    return screen.find("ddprun status, attempt 0: 4 ranks, 4 running") != std::string::npos && ranks == 4 &&
           screen.find("[3]:rank 3 step") != std::string::npos;
  })) << seen;
  // The block is the bottom of what is drawn: below it nothing but blank rows; worker lines above it are whole.
  std::vector<std::string> lines = split_lines(seen);
  std::size_t title = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("ddprun status, attempt 0") != std::string::npos) title = i;
  }
  ASSERT_GT(title, 0u) << seen;
  EXPECT_NE(lines[title + 1].find("rank state"), std::string::npos) << seen;
  for (std::size_t i = title + 2; i < title + 6 && i < lines.size(); ++i) {
    EXPECT_TRUE(std::regex_match(lines[i], rank_line)) << "'" << lines[i] << "'\n" << seen;
  }
  for (std::size_t i = title + 6; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].find_first_not_of(' '), std::string::npos) << "'" << lines[i] << "'\n" << seen;
  }
  expect_whole_worker_lines(seen);

  // After the job: the block is gone, every worker line still whole, the shell's line after them.
  ASSERT_TRUE(tmux.wait_for([](const std::string& screen) { return screen.find("EXIT=") != std::string::npos; })) << tmux.screen();
  std::string end = tmux.screen();
  EXPECT_NE(end.find("EXIT=0"), std::string::npos) << end;
  EXPECT_EQ(end.find("ddprun status"), std::string::npos) << end;
  EXPECT_EQ(end.find("rank state"), std::string::npos) << end;
  expect_whole_worker_lines(end);
  EXPECT_NE(end.find("[2]:rank 2 step 315"), std::string::npos) << end;  // the last line of rank 2 (8 s at 40/s)
}

/// The screen's line that holds `text`, or "".
std::string line_with(const std::string& screen, const std::string& text) {
  for (const auto& line : split_lines(screen)) {
    if (line.find(text) != std::string::npos) return line;
  }
  return "";
}

TEST(Status, TheBlockIsColouredUnlessNoColorAndGoesBeforeTheFailureSummary) {
  if (std::system("tmux -V >/dev/null 2>&1") != 0) GTEST_SKIP() << "tmux is not installed";
  // Rank 1 reports for 3 s, then fails: the failure summary is printed whole, the block gone.
  const std::string worker = "'" + kProgressWorker + "' --rate 40 --seconds 3; [ \"\\$RANK\" = 1 ] && exit 3; exit 0";
  for (bool no_color : {false, true}) {
    TempDir tmp;
    Tmux tmux("TMPDIR=" + tmp.str() + (no_color ? " NO_COLOR=1 " : " ") + ddprun_binary() +
              " --standalone --nproc-per-node 2 --no-python /bin/sh -c \"" + worker + "\"; echo EXIT=$?; sleep 60");
    ASSERT_TRUE(tmux.started());
    std::string coloured;
    ASSERT_TRUE(tmux.wait_for([&](const std::string&) {
      coloured = tmux.screen(true);
      return coloured.find("ddprun status, attempt 0") != std::string::npos;
    })) << tmux.screen();
    const std::string title = line_with(coloured, "ddprun status, attempt 0");
    if (no_color) {
      EXPECT_EQ(title.find('\x1b'), std::string::npos) << title;
    } else {
      EXPECT_NE(title.find("\x1b[1m"), std::string::npos) << title;  // bold
    }
    ASSERT_TRUE(tmux.wait_for([](const std::string& screen) { return screen.find("EXIT=") != std::string::npos; }))
        << tmux.screen();
    const std::string end = tmux.screen();
    EXPECT_NE(end.find("EXIT=1"), std::string::npos) << end;
    EXPECT_EQ(end.find("ddprun status"), std::string::npos) << end;
    EXPECT_NE(end.find("/bin/sh FAILED"), std::string::npos) << end;
    EXPECT_NE(end.find("Root Cause (first observed failure):"), std::string::npos) << end;
    EXPECT_NE(end.find("  exitcode  : 3"), std::string::npos) << end;
  }
}

TEST(Status, StatusOffDrawsNoBlockOnATerminal) {
  if (std::system("tmux -V >/dev/null 2>&1") != 0) GTEST_SKIP() << "tmux is not installed";
  TempDir tmp;
  Tmux tmux("TMPDIR=" + tmp.str() + " NO_COLOR=1 " + ddprun_binary() +
            " --standalone --nproc-per-node 2 --status off '--log-line-prefix-template=[${rank}]:' --no-python " +
            kProgressWorker + " --rate 40 --seconds 4 --print-every 20; echo EXIT=$?; sleep 60");
  ASSERT_TRUE(tmux.started());
  std::string seen;
  bool block = false;
  ASSERT_TRUE(tmux.wait_for([&](const std::string& screen) {
    seen = screen;
    block |= screen.find("ddprun status") != std::string::npos;
    return screen.find("EXIT=") != std::string::npos;
  })) << seen;
  EXPECT_FALSE(block) << seen;
  EXPECT_NE(seen.find("EXIT=0"), std::string::npos) << seen;
}

}  // namespace
}  // namespace ddprun::testing

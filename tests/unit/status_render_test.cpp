// The console's status block and summary line, by table: number formats, the block's lines at a
// width (every rank with its state, step, rate, CPU, RSS, output age and text), many ranks fitted to
// the rows with "N more" (the failed and the stragglers kept), colours only when asked, a worker's
// text shown and never obeyed (escape sequences, line breaks), and the one-line summary.
#include "launcher/observe/status_render.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launcher/output/live_region.hpp"

namespace ddprun::launcher {
namespace {

TEST(StatusFormat, Numbers) {
  struct Case {
    double value;
    std::string text;
  };
  for (const Case& c : std::vector<Case>{{0, "0"}, {950, "950"}, {9600, "9.6k"}, {96000, "96k"}, {1.2e6, "1.2M"},
                                         {250e6, "250M"}, {3e9, "3.0G"}, {-1, "-"}}) {
    EXPECT_EQ(format_count(c.value), c.text) << c.value;
  }
  EXPECT_EQ(format_bytes(512), "512B");
  EXPECT_EQ(format_bytes(2048), "2.0K");
  EXPECT_EQ(format_bytes(12'900'000), "12.3M");
  EXPECT_EQ(format_bytes(1'288'490'189), "1.2G");
  EXPECT_EQ(format_age(-1), "-");
  EXPECT_EQ(format_age(0.4), "0s");
  EXPECT_EQ(format_age(59.9), "59s");
  EXPECT_EQ(format_age(750), "12m");
  EXPECT_EQ(format_age(3 * 3600 + 5), "3h");
}

RankStatus rank(int r, RankState state, std::int64_t step, double rate, std::string text = {}) {
  RankStatus s;
  s.rank = r;
  s.local_rank = r;
  s.pid = 1000 + r;
  s.state = state;
  s.cpu_percent = 99.4;
  s.rss_bytes = 12'900'000;
  s.output_age_seconds = 2.5;
  if (step >= 0) {
    ProgressSample p;
    p.step = step;
    p.samples = step * 32;
    p.samples_per_second = rate;
    p.text = std::move(text);
    s.progress = p;
  }
  return s;
}

NodeStatus four_ranks() {
  NodeStatus node;
  node.attempt = 0;
  node.ranks = {rank(0, RankState::running, 1204, 9600, "epoch 1 loss 0.31"), rank(1, RankState::running, 1199, 9500),
                rank(2, RankState::running, 1210, 9700), rank(3, RankState::running, 602, 4800, "epoch 1 loss 0.33")};
  node.ranks[3].straggler = true;
  return node;
}

TEST(StatusBlock, OneLinePerRankUnderATitleAndAHeader) {
  auto lines = render_status_block(four_ranks(), 100, 20, false);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "ddprun status, attempt 0: 4 ranks, 3 running, 1 straggler; 34k samples/s");
  EXPECT_EQ(lines[1], "rank state          step  samples/s  cpu%     rss   out  text");
  EXPECT_EQ(lines[2], "   0 running        1204       9.6k   99%   12.3M    2s  epoch 1 loss 0.31");
  EXPECT_EQ(lines[5], "   3 straggler       602       4.8k   99%   12.3M    2s  epoch 1 loss 0.33");
}

TEST(StatusBlock, AWorkersTextCannotColourOrMoveTheTerminal) {
  // The text is the worker's: an escape sequence in it (a colour, a title, a cursor move) or a line
  // break is shown, not obeyed, so that nothing of it lasts past its own cell (issue 25).
  struct Case {
    const char* name;
    std::string text;
    std::string shown;
  };
  const std::vector<Case> cases{
      {"plain", "epoch 1 loss 0.31", "epoch 1 loss 0.31"},
      {"a colour, no reset", "\x1b[31mloss 0.31", "^[[31mloss 0.31"},
      {"a colour and its reset", "\x1b[1mbold\x1b[0m", "^[[1mbold^[[0m"},
      {"a window title", "\x1b]0;pwned\x07step", "^[]0;pwned^Gstep"},
      {"a cursor move up", "\x1b[2Aup", "^[[2Aup"},
      {"a line break", "line one\nline two", "line one line two"},
      {"a tab", "a\tb", "a b"},
      {"a carriage return", "100%\rdone", "100%done"},
      {"DEL and NUL", std::string("a\x7f") + '\0' + "b", "a^?^@b"},
      {"UTF-8", "époque ✓", "époque ✓"},
  };
  for (bool color : {false, true}) {
    for (const Case& c : cases) {
      NodeStatus node;
      node.ranks = {rank(0, RankState::running, 7, 10, c.text), rank(1, RankState::failed, 7, 10, c.text)};
      node.ranks[1].exitcode = 1;
      auto lines = render_status_block(node, 200, 20, color);
      ASSERT_EQ(lines.size(), 4u) << c.name;
      EXPECT_EQ(lines[2], "   0 running           7         10   99%   12.3M    2s  " + c.shown) << c.name;
      const std::string failed = "   1 failed            7         10     -       -    2s  exitcode 1; " + c.shown;
      EXPECT_EQ(lines[3], color ? "\x1b[31m" + failed + "\x1b[0m" : failed) << c.name;
    }
  }
}

TEST(StatusBlock, LinesFitTheWidth) {
  for (std::size_t columns : {20u, 40u, 61u, 80u, 200u}) {
    for (const auto& line : render_status_block(four_ranks(), columns, 20, false)) {
      EXPECT_LE(line.size(), columns - 1) << columns << ": " << line;
      EXPECT_EQ(fit_to_width(line, columns - 1), line);
    }
  }
}

TEST(StatusBlock, StatesWithoutProgressAndEndedRanks) {
  NodeStatus node;
  node.ranks = {rank(0, RankState::starting, -1, 0), rank(1, RankState::failed, 7, 0), rank(2, RankState::exited, -1, 0)};
  node.ranks[1].exitcode = -9;
  node.ranks[1].output_age_seconds = -1;
  node.restarts = 2;
  node.attempt = 2;
  auto lines = render_status_block(node, 120, 20, false);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "ddprun status, attempt 2: 3 ranks, 1 starting, 1 exited, 1 failed; 2 restarts");
  EXPECT_EQ(lines[2], "   0 starting          -          -   99%   12.3M    2s  ");
  EXPECT_EQ(lines[3], "   1 failed            7          0     -       -     -  signal 9");
  EXPECT_EQ(lines[4], "   2 exited            -          -     -       -    2s  exitcode 0");
}

TEST(StatusBlock, ManyRanksFitTheRowsAndSayHowManyMore) {
  NodeStatus node;
  for (int r = 0; r < 64; ++r) node.ranks.push_back(rank(r, RankState::running, 100, 10));
  node.ranks[40].state = RankState::failed;
  node.ranks[50].straggler = true;
  auto lines = render_status_block(node, 80, 10, false);
  ASSERT_EQ(lines.size(), 10u);
  // The failed rank and the straggler are among the seven shown, in rank order, then the count of the rest.
  EXPECT_EQ(lines[2].substr(0, 4), "   0");
  EXPECT_EQ(lines[6].substr(0, 4), "   4");
  EXPECT_EQ(lines[7].substr(0, 11), "  40 failed");
  EXPECT_EQ(lines[8].substr(0, 14), "  50 straggler");
  EXPECT_EQ(lines[9], "   ... 57 more ranks");
  // Fewer rows than the title, the header and a line: three lines still.
  EXPECT_EQ(render_status_block(node, 80, 1, false).size(), 3u);
}

TEST(StatusBlock, ColoursOnlyWhenAsked) {
  NodeStatus node = four_ranks();
  node.ranks[1].state = RankState::failed;
  for (const auto& line : render_status_block(node, 100, 20, false)) EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  auto coloured = render_status_block(node, 100, 20, true);
  EXPECT_EQ(coloured[0].rfind("\x1b[1m", 0), 0u);
  EXPECT_EQ(coloured[3].rfind("\x1b[31m", 0), 0u);  // failed: red
  EXPECT_EQ(coloured[5].rfind("\x1b[33m", 0), 0u);  // straggler: yellow
  EXPECT_EQ(coloured[2].find('\x1b'), std::string::npos);
}

TEST(StatusLine, OneCompactLine) {
  struct Case {
    const char* name;
    NodeStatus node;
    std::string line;
  };
  NodeStatus silent;
  silent.ranks = {rank(0, RankState::running, -1, 0), rank(1, RankState::starting, -1, 0)};
  NodeStatus mixed = four_ranks();
  mixed.ranks[1].progress.reset();
  NodeStatus many;
  for (int r = 0; r < 20; ++r) many.ranks.push_back(rank(r, RankState::running, 100 + r, 1));
  many.ranks[7].progress->step = 3;
  const std::vector<Case> cases{
      {"four reporting, one straggler", four_ranks(),
       "status: 3 running, 1 straggler; step 0:1204 1:1199 2:1210 3:602; 34k samples/s; cpu 398%; rss 49.2M; stragglers: 3"},
      {"nobody reports progress", silent, "status: 1 starting, 1 running; cpu 199%; rss 24.6M"},
      {"one rank silent", mixed,
       "status: 3 running, 1 straggler; step 0:1204 1:- 2:1210 3:602; 24k samples/s; cpu 398%; rss 49.2M; stragglers: 3"},
      {"many ranks: min, median, max", many,
       "status: 20 running; step min 3 (rank 7), median 110, max 119 (rank 19); 20 samples/s; cpu 1988%; rss 246.0M"},
  };
  for (const auto& c : cases) EXPECT_EQ(render_status_line(c.node), c.line) << c.name;
}

}  // namespace
}  // namespace ddprun::launcher

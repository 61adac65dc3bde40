// The console's status block and summary line, by table: number formats, the block's lines at a
// width (every rank with its state, step, rate, CPU, RSS, output age and text), many ranks fitted to
// the rows with "N more" (the failed and the stragglers kept), colours only when asked, a worker's
// text shown and never obeyed (escape sequences, line breaks), and the one-line summary. With GPUs:
// the gpu cell by table (unknown parts "-", never 0; flags; a problem's word; the GPU a rank works
// on), the column only when a rank has one, GPU stragglers beside stragglers, and the gpu note.
#include "launcher/observe/status_render.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launcher/gpu/gpu_state.hpp"
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

constexpr std::uint64_t kGiB = 1024ull * 1024 * 1024;

/// A GPU as NVML reports a busy H100: every value known.
RankGpu busy_gpu(unsigned int index) {
  RankGpu gpu;
  gpu.index = index;
  gpu.uuid = "GPU-" + std::to_string(index);
  gpu.utilisation_percent = 97;
  gpu.memory_used_bytes = 61 * kGiB;
  gpu.memory_total_bytes = 80 * kGiB;
  gpu.temperature_c = 71;
  gpu.power_watts = 612.5;
  gpu.uncorrectable_ecc_errors = 0;
  return gpu;
}

RankStatus with_gpus(std::vector<RankGpu> gpus) {
  RankStatus r = rank(0, RankState::running, 10, 10);
  r.gpus = std::move(gpus);
  return r;
}

TEST(GpuCell, OneShortCellPerRank) {
  struct Case {
    const char* name;
    std::vector<RankGpu> gpus;
    std::string cell;
  };
  RankGpu unknown;  // a GeForce board without permission: nothing known but its index
  unknown.index = 1;
  RankGpu partly = unknown;
  partly.memory_used_bytes = kGiB / 2;
  partly.memory_total_bytes = 16 * kGiB;
  RankGpu idle = busy_gpu(0);
  idle.utilisation_percent = 0;
  idle.memory_used_bytes = 0;
  idle.temperature_c = 0;
  RankGpu small = busy_gpu(0);
  small.memory_used_bytes = 9'600 * 1024ull * 1024;  // 9.4 GiB
  small.memory_total_bytes = 11 * kGiB;
  RankGpu hot = busy_gpu(0);
  hot.temperature_c = 83;
  hot.throttle = {"HwThermalSlowdown"};
  hot.xid_count = 3;
  hot.xids = {13, 48, 79};
  RankGpu xid_unlisted = busy_gpu(0);
  xid_unlisted.xid_count = 1;
  RankGpu lost;
  lost.index = 2;
  lost.problem = "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)";
  lost.xid_count = 1;
  lost.xids = {79};
  // Several GPUs: the one the rank holds memory on is the one shown.
  std::vector<RankGpu> eight;
  for (unsigned int i = 0; i < 8; ++i) {
    RankGpu gpu = busy_gpu(i);
    gpu.utilisation_percent = 10 + i;
    gpu.own_memory_bytes = 0;
    eight.push_back(gpu);
  }
  std::vector<RankGpu> works_on_3 = eight;
  works_on_3[3].own_memory_bytes = 60 * kGiB;
  std::vector<RankGpu> another_lost = works_on_3;  // rank works on 3; 5 is lost: its own GPU shown
  another_lost[5].problem = lost.problem;
  another_lost[5].own_memory_bytes.reset();
  std::vector<RankGpu> own_unknown = eight;  // the process list unknown everywhere (a lost GPU)
  for (auto& gpu : own_unknown) gpu.own_memory_bytes.reset();
  own_unknown[5].problem = lost.problem;

  const std::vector<Case> cases{
      {"no GPU", {}, ""},
      {"every value known", {busy_gpu(0)}, "97% 61/80G 71C"},
      {"known zeros are zeros", {idle}, "0% 0/80G 0C"},
      {"below 10 GiB, a decimal", {small}, "97% 9.4/11G 71C"},
      {"nothing known: dashes, never 0", {unknown}, "- - -"},
      {"memory known only", {partly}, "- 0.5/16G -"},
      {"throttled, with Xids: the last one", {hot}, "97% 61/80G 83C thr xid79"},
      {"Xids counted, none listed", {xid_unlisted}, "97% 61/80G 71C xid"},
      {"a problem replaces the values", {lost}, "LOST"},
      {"several, memory held nowhere: the first", eight, "10% 61/80G 71C +7"},
      {"several: the one it holds memory on", works_on_3, "13% 61/80G 71C +7"},
      {"another GPU's problem does not hide its own", another_lost, "13% 61/80G 71C +7"},
      {"holdings unknown: a problem first", own_unknown, "LOST +7"},
  };
  for (const Case& c : cases) EXPECT_EQ(gpu_cell(with_gpus(c.gpus)), c.cell) << c.name;
}

TEST(GpuCell, EachHealthProblemInOneWord) {
  // The reasons as gpu_state.cpp words them: a change of wording there fails here.
  struct Case {
    const char* name;
    void (*change)(GpuState&);
    std::string word;
  };
  const std::vector<Case> cases{
      {"lost", [](GpuState& g) { g.lost = true; }, "LOST"},
      {"reset required", [](GpuState& g) { g.reset_required = true; }, "RESET"},
      {"retired pages", [](GpuState& g) { g.retired_pages_pending.value = true; }, "RETIRED"},
      {"one ECC error", [](GpuState& g) { g.uncorrectable_ecc_errors.value = 1; }, "ECC"},
      {"ECC errors", [](GpuState& g) { g.uncorrectable_ecc_errors.value = 12; }, "ECC"},
      {"rows to remap", [](GpuState& g) { g.remapped_rows_pending.value = true; }, "REMAP"},
  };
  for (const Case& c : cases) {
    GpuState gpu;
    c.change(gpu);
    const auto problem = health_problem(gpu);
    ASSERT_TRUE(problem.has_value()) << c.name;
    EXPECT_EQ(gpu_problem_word(*problem), c.word) << c.name << ": " << *problem;
  }
  EXPECT_EQ(gpu_problem_word("is haunted\x1b[31m"), "UNHEALTHY") << "another reason: one fixed word";
}

NodeStatus gpu_node() {
  NodeStatus node = four_ranks();
  node.ranks[3].straggler = false;
  for (RankStatus& r : node.ranks) r.gpus = {busy_gpu(static_cast<unsigned int>(r.rank))};
  node.ranks[1].gpus[0].throttle = {"SwPowerCap"};
  node.ranks[1].gpus[0].xid_count = 2;
  node.ranks[1].gpus[0].xids = {13, 79};
  node.ranks[2].gpus[0].problem = "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)";
  node.ranks[3].gpus[0].utilisation_percent = 12;
  node.ranks[3].gpu_straggler = true;
  return node;
}

TEST(StatusBlock, AGpuColumnWhenARankHasGpus) {
  auto lines = render_status_block(gpu_node(), 200, 20, false);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "ddprun status, attempt 0: 4 ranks, 3 running, 1 gpu straggler; 34k samples/s");
  EXPECT_EQ(lines[1], "rank state             step  samples/s  cpu%     rss  gpu                        out  text");
  EXPECT_EQ(lines[2], "   0 running           1204       9.6k   99%   12.3M  97% 61/80G 71C              2s  epoch 1 loss 0.31");
  EXPECT_EQ(lines[3], "   1 running           1199       9.5k   99%   12.3M  97% 61/80G 71C thr xid79    2s  ");
  EXPECT_EQ(lines[4], "   2 running           1210       9.7k   99%   12.3M  LOST                        2s  ");
  EXPECT_EQ(lines[5], "   3 gpu straggler      602       4.8k   99%   12.3M  12% 61/80G 71C              2s  epoch 1 loss 0.33");
}

TEST(StatusBlock, NoGpuColumnWithoutGpusAndACellNeverWiderThanItsBound) {
  for (const auto& line : render_status_block(four_ranks(), 200, 20, false)) {
    EXPECT_EQ(line.find("gpu"), std::string::npos) << line;
  }
  NodeStatus node = gpu_node();
  for (RankGpu& gpu : node.ranks[0].gpus) {
    gpu.throttle = {"SwPowerCap"};
    gpu.xid_count = 1;
    gpu.xids = {18446744073709551615ull};  // a cell of 44 characters
  }
  auto lines = render_status_block(node, 300, 20, false);
  // The state column is 13 wide (gpu straggler), so the gpu column starts at 54 and is 30 wide.
  EXPECT_EQ(lines[2].substr(54, 31), "97% 61/80G 71C thr xid18446744 ");
  EXPECT_EQ(lines[3].substr(54, 31), "97% 61/80G 71C thr xid79       ");
}

TEST(StatusBlock, TheGpuNoteIsTheLastLineAndTakesARow) {
  NodeStatus node = gpu_node();
  node.gpu_note = "NVML stalled: nvmlDeviceGetUtilizationRates has not returned for 2.0 s";
  auto lines = render_status_block(node, 200, 20, false);
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[6], "gpu: NVML stalled: nvmlDeviceGetUtilizationRates has not returned for 2.0 s");
  // Five rows: the title, the header, two ranks (the problem and the gpu straggler first), "more", the note.
  lines = render_status_block(node, 200, 6, false);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[2].substr(0, 13), "   2 running ");
  EXPECT_EQ(lines[3].substr(0, 18), "   3 gpu straggler");
  EXPECT_EQ(lines[4], "   ... 2 more ranks");
  EXPECT_EQ(lines[5].rfind("gpu: NVML stalled", 0), 0u);
  // Never fewer than the title, the header, a line and the note.
  EXPECT_EQ(render_status_block(node, 200, 1, false).size(), 4u);
  // A note is the node's text: shown, never obeyed; coloured only when asked.
  node.gpu_note = "stalled\x1b[2A\nagain";
  lines = render_status_block(node, 200, 20, true);
  EXPECT_EQ(lines.back(), "\x1b[33mgpu: stalled^[[2A again\x1b[0m");
  EXPECT_EQ(lines[5].rfind("\x1b[33m   3 gpu straggler", 0), 0u) << "a gpu straggler is yellow";
}

TEST(StatusBlock, LinesWithGpusFitTheWidth) {
  NodeStatus node = gpu_node();
  node.gpu_note = "NVML stalled: nvmlDeviceGetUtilizationRates has not returned for 2.0 s";
  for (std::size_t columns : {20u, 40u, 61u, 80u, 200u}) {
    for (const auto& line : render_status_block(node, columns, 20, false)) {
      EXPECT_LE(line.size(), columns - 1) << columns << ": " << line;
    }
  }
}

TEST(StatusLine, GpusInTheLine) {
  struct Case {
    const char* name;
    NodeStatus node;
    std::string line;
  };
  NodeStatus noted = gpu_node();
  noted.ranks[0].gpus[0].utilisation_percent.reset();
  noted.gpu_note = "NVML stalled: nvmlDeviceGetUtilizationRates has not returned for 2.0 s";
  NodeStatus both = gpu_node();
  both.ranks[3].straggler = true;  // a straggler by its steps too: named in both lists, counted once
  NodeStatus many;
  for (int r = 0; r < 20; ++r) {
    many.ranks.push_back(rank(r, RankState::running, 100, 1));
    many.ranks.back().gpus = {busy_gpu(static_cast<unsigned int>(r))};
  }
  many.ranks[7].gpus[0].utilisation_percent = 5;
  many.ranks[8].gpus[0].utilisation_percent.reset();
  NodeStatus many_unknown;
  for (int r = 0; r < 20; ++r) {
    many_unknown.ranks.push_back(rank(r, RankState::running, -1, 1));
    many_unknown.ranks.back().gpus = {RankGpu{}};
  }
  const std::string steps = "step 0:1204 1:1199 2:1210 3:602; 34k samples/s; cpu 398%; rss 49.2M";
  const std::vector<Case> cases{
      {"utilisation, a gpu straggler, a problem", gpu_node(),
       "status: 3 running, 1 gpu straggler; " + steps + "; gpu 0:97% 1:97% 2:- 3:12%; gpu stragglers: 3; gpu problems: 2:LOST"},
      {"unknown and the note", noted,
       "status: 3 running, 1 gpu straggler; " + steps +
           "; gpu 0:- 1:97% 2:- 3:12%; gpu stragglers: 3; gpu problems: 2:LOST; gpu: NVML stalled: "
           "nvmlDeviceGetUtilizationRates has not returned for 2.0 s"},
      {"both kinds of straggler", both,
       "status: 3 running, 1 straggler; " + steps +
           "; stragglers: 3; gpu 0:97% 1:97% 2:- 3:12%; gpu stragglers: 3; gpu problems: 2:LOST"},
      {"many ranks: min, median, max of the known", many,
       "status: 20 running; step min 100 (rank 0), median 100, max 100 (rank 0); 20 samples/s; cpu 1988%; rss 246.0M; "
       "gpu min 5% (rank 7), median 97%, max 97% (rank 0)"},
      {"many ranks, none known", many_unknown, "status: 20 running; cpu 1988%; rss 246.0M; gpu -"},
  };
  for (const auto& c : cases) EXPECT_EQ(render_status_line(c.node), c.line) << c.name;
}

}  // namespace
}  // namespace ddprun::launcher

// What `ddprun status` and `ddprun stacks` print, to the character: with GPUs, their column (only
// then), each unhealthy GPU once per node with its reason, and the gpu note, made terminal-safe.
#include <gtest/gtest.h>

#include "launcher/observe/status_table.hpp"

namespace ddprun::launcher {
namespace {

JobStatus two_nodes() {
  RankStatus r0;
  r0.rank = 0;
  r0.pid = 41213;
  r0.state = RankState::running;
  r0.cpu_percent = 99.4;
  r0.rss_bytes = 12900000;
  r0.output_age_seconds = 0.2;
  r0.progress = ProgressSample{1204, 0, "epoch 1 loss 0.31", 0, 0, 9600};
  RankStatus r1;
  r1.rank = 1;
  r1.local_rank = 1;
  r1.pid = 41214;
  r1.state = RankState::failed;
  r1.exitcode = -9;
  RankStatus r2 = r0;
  r2.rank = 2;
  r2.pid = 7;
  r2.straggler = true;
  r2.progress->text = "bell\x07 and\nnewline \x1b[31mred";
  NodeStatus a{0, "host-a", 1, 1, 0, 1000.0, {r0, r1}};
  NodeStatus b{1, "host-b", 1, 1, 2, 0, {r2}};
  return JobStatus{"job7", 3, {b, a}};  // the table orders by rank whatever the order of nodes
}

TEST(StatusTable, ARowPerRankEveryNode) {
  const std::string expected =
      "run job7 (pid 1, /logs): world size 3, 2 nodes; restarts 1, hangs 2\n"
      "node 1 (host-b): attempt 1, not sampled yet\n"
      "node 0 (host-a): attempt 1, sampled 2s ago\n"
      "rank  node  local    pid  state        step  samples/s  cpu%    rss  out  text\n"
      "   0     0      0  41213  running      1204       9.6k   99%  12.3M   0s  epoch 1 loss 0.31\n"
      "   1     0      1  41214  failed (-9)     -          -    0%     0B    -\n"
      "   2     1      0      7  straggler    1204       9.6k   99%  12.3M   0s  bell^G and newline ^[[31mred\n";
  EXPECT_EQ(format_status_table(two_nodes(), 1002.4, "run job7 (pid 1, /logs)"), expected);
}

TEST(StatusTable, AGpuColumnAndTheGpuLinesUnderTheTable) {
  JobStatus job = two_nodes();
  NodeStatus& b = job.nodes[0];
  NodeStatus& a = job.nodes[1];
  RankGpu gpu;
  gpu.index = 0;
  gpu.uuid = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
  gpu.bus_id = "00000000:3B:00.0";
  gpu.utilisation_percent = 97;
  gpu.memory_used_bytes = 61ull << 30;
  gpu.memory_total_bytes = 80ull << 30;
  gpu.temperature_c = 71;
  RankGpu lost;
  lost.index = 1;
  lost.bus_id = "00000000:5E:00.0";
  lost.problem = "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)";
  // Rank 0 sees both and works on GPU 0; rank 1 (failed) sees the lost one too; rank 2 has none.
  gpu.own_memory_bytes = 60ull << 30;
  a.ranks[0].gpus = {gpu, lost};
  a.ranks[1].gpus = {lost};
  a.gpu_note = "NVML stalled: nvmlDeviceGetUtilizationRates has not returned for \x1b[31m2.0 s";
  b.ranks[0].gpu_straggler = true;
  b.ranks[0].straggler = false;
  const std::string expected =
      "run job7 (pid 1, /logs): world size 3, 2 nodes; restarts 1, hangs 2\n"
      "node 1 (host-b): attempt 1, not sampled yet\n"
      "node 0 (host-a): attempt 1, sampled 2s ago\n"
      "rank  node  local    pid  state          step  samples/s  cpu%    rss  gpu                out  text\n"
      "   0     0      0  41213  running        1204       9.6k   99%  12.3M  97% 61/80G 71C +1   0s  epoch 1 loss 0.31\n"
      "   1     0      1  41214  failed (-9)       -          -    0%     0B  LOST                 -\n"
      "   2     1      0      7  gpu straggler  1204       9.6k   99%  12.3M  -                   0s  bell^G and newline ^[[31mred\n"
      "node 0: GPU 1 (uuid unknown, bus 00000000:5E:00.0) has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)\n"
      "node 0: gpu: NVML stalled: nvmlDeviceGetUtilizationRates has not returned for ^[[31m2.0 s\n";
  EXPECT_EQ(format_status_table(job, 1002.4, "run job7 (pid 1, /logs)"), expected);
}

TEST(StatusTable, WarmInterpretersUnderTheirNode) {
  JobStatus job{"r", 2, {NodeStatus{0, "h", 0, 0, 0, 0, {}, {{0, 301, true}, {1, 302, false}}}}};
  EXPECT_EQ(format_status_table(job, 0, "run r"),
            "run r: world size 2, 1 node; restarts 0, hangs 0\nnode 0 (h): attempt 0, not sampled yet\n"
            "  warm (--preload): 2 interpreters, 1 ready, 1 importing; pids 301 302\n"
            "no workers running\n");
}

TEST(StatusTable, NoWorkersYet) {
  JobStatus job{"r", 2, {NodeStatus{0, "h", 0, 0, 0, 0, {}}}};
  EXPECT_EQ(format_status_table(job, 0, "run r"),
            "run r: world size 2, 1 node; restarts 0, hangs 0\nnode 0 (h): attempt 0, not sampled yet\n"
            "no workers running\n");
}

TEST(StatusTable, StacksDigestFirstThenEveryRankInOrder) {
  RankStacks r1;
  r1.rank = 1;
  r1.pid = 11;
  r1.file = "/logs/attempt_0/1/stacks.txt";
  r1.threads.push_back({"Thread 1 (LWP 11)", false, {{"nanosleep", "libc.so.6"}, {"main", "w.cpp:9"}}});
  r1.threads.push_back({"MainThread", true, {{"sleep", "train.py:41"}}});
  RankStacks r0;
  r0.rank = 0;
  r0.pid = 10;
  r0.error = "gdb: ptrace: Operation not permitted";
  const std::string expected =
      "rank 1: nanosleep <- main\n"
      "rank 0: <no stacks>\n"
      "\n"
      "rank 0 (pid 10, node 0): no stacks: gdb: ptrace: Operation not permitted\n"
      "rank 1 (pid 11, node 0) /logs/attempt_0/1/stacks.txt:\n"
      "  Thread 1 (LWP 11)\n"
      "    nanosleep  libc.so.6\n"
      "    main  w.cpp:9\n"
      "  Python MainThread\n"
      "    sleep  train.py:41\n";
  EXPECT_EQ(format_stacks({r1, r0}, {"rank 1: nanosleep <- main", "rank 0: <no stacks>"}), expected);
  EXPECT_EQ(format_stacks({}, {}), "no ranks to show\n");
}

}  // namespace
}  // namespace ddprun::launcher

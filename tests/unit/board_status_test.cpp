// What a node puts on the job board stays under its bound whatever the workers report, and reads
// back as what was published.
#include "launcher/observe/board_status.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launcher/observe/status_json.hpp"

namespace ddprun::launcher {
namespace {

NodeStatus node_of(int ranks, std::size_t text_bytes) {
  NodeStatus node;
  node.node_rank = 1;
  node.host = "host-a";
  for (int i = 0; i < ranks; ++i) {
    RankStatus rank;
    rank.rank = 8 + i;
    rank.local_rank = i;
    rank.pid = 1000 + i;
    rank.state = RankState::running;
    rank.progress = ProgressSample{.step = 7, .samples = 70, .text = std::string(text_bytes, 'x')};
    node.ranks.push_back(rank);
  }
  return node;
}

TEST(BoardStatus, ASmallNodeReadsBackWhole) {
  NodeStatus node = node_of(2, 10);
  NodeStatus back = node_status_from_json(nlohmann::json::parse(board_status_json(node)));
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.node_rank, 1);
  EXPECT_EQ(back.ranks[1].rank, 9);
  EXPECT_EQ(back.ranks[1].pid, 1001);
  EXPECT_EQ(back.ranks[1].progress->text, std::string(10, 'x'));
}

TEST(BoardStatus, AHugeProgressTextIsCutAndTheDocumentStaysUnderTheBound) {
  // A worker bypassing the 256-byte channel limit, a host name of a megabyte: still bounded.
  NodeStatus node = node_of(8, 1 << 20);
  node.host = std::string(1 << 20, 'h');
  const std::string text = board_status_json(node);
  EXPECT_LE(text.size(), kBoardStatusBytes);
  NodeStatus back = node_status_from_json(nlohmann::json::parse(text));
  ASSERT_EQ(back.ranks.size(), 8u) << "cutting the texts was enough: every rank kept";
  EXPECT_EQ(back.ranks[0].progress->text.size(), 64u);
  EXPECT_EQ(back.ranks[0].progress->step, 7);
  EXPECT_EQ(back.host.size(), 255u);
}

TEST(BoardStatus, ATextIsCutOnACharacterBoundary) {
  NodeStatus node = node_of(1, 0);
  std::string text;
  for (int i = 0; i < 40; ++i) text += "\xc3\xa9";  // é: 2 bytes each, 80 bytes
  node.ranks[0].progress->text = text;
  NodeStatus back = node_status_from_json(nlohmann::json::parse(board_status_json(node)));
  EXPECT_EQ(back.ranks[0].progress->text, text.substr(0, 64));
}

TEST(BoardStatus, TooManyRanksForTheBoundLoseTheLastRanksNotTheBound) {
  NodeStatus node = node_of(64, 40);
  const std::size_t bound = 4096;
  const std::string text = board_status_json(node, bound);
  EXPECT_LE(text.size(), bound);
  NodeStatus back = node_status_from_json(nlohmann::json::parse(text));
  EXPECT_GT(back.ranks.size(), 0u);
  EXPECT_LT(back.ranks.size(), 64u);
  EXPECT_EQ(back.ranks[0].rank, 8) << "the first ranks are kept";
}

TEST(BoardStatus, ABigNodesRanksKeepTheGpusTheyWorkOnBeforeAnyRankGoes) {
  // 16 ranks that each see all 16 GPUs (torchrun sets no CUDA_VISIBLE_DEVICES), each working on its
  // own: 256 GPUs of about 400 bytes do not fit in 64 KiB.
  NodeStatus node = node_of(16, 10);
  for (int r = 0; r < 16; ++r) {
    for (unsigned int g = 0; g < 16; ++g) {
      RankGpu gpu;
      gpu.index = g;
      gpu.uuid = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f" + std::to_string(g % 10);
      gpu.bus_id = "00000000:3B:00.0";
      gpu.utilisation_percent = 97;
      gpu.memory_used_bytes = 65'498'251'264ull;
      gpu.memory_total_bytes = 85'899'345'920ull;
      gpu.own_memory_bytes = static_cast<int>(g) == r ? 64'424'509'440ull : 0;
      gpu.temperature_c = 71;
      gpu.power_watts = 612.5;
      gpu.throttle = {"SwPowerCap"};
      gpu.uncorrectable_ecc_errors = 0;
      gpu.xids = {79, 79, 79, 79, 79, 79, 79, 79};
      node.ranks[static_cast<std::size_t>(r)].gpus.push_back(gpu);
    }
  }
  node.ranks[0].gpus[5].problem = "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)";
  node.ranks[0].gpus[5].own_memory_bytes.reset();
  node.ranks[1].gpus[9].own_memory_bytes.reset();  // the driver could not say: kept
  ASSERT_GT(nlohmann::json::parse(board_status_json(node, 1 << 30)).dump().size(), kBoardStatusBytes);

  const std::string text = board_status_json(node);
  EXPECT_LE(text.size(), kBoardStatusBytes);
  NodeStatus back = node_status_from_json(nlohmann::json::parse(text));
  ASSERT_EQ(back.ranks.size(), 16u) << "every rank kept";
  for (std::size_t r = 2; r < 16; ++r) {
    ASSERT_EQ(back.ranks[r].gpus.size(), 1u) << r;
    EXPECT_EQ(back.ranks[r].gpus[0].index, r) << "the GPU it works on";
    EXPECT_EQ(back.ranks[r].gpus[0].utilisation_percent, 97u);
  }
  ASSERT_EQ(back.ranks[0].gpus.size(), 2u);
  EXPECT_EQ(back.ranks[0].gpus[1].problem, "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)")
      << "a GPU with a problem stays";
  ASSERT_EQ(back.ranks[1].gpus.size(), 2u);
  EXPECT_EQ(back.ranks[1].gpus[1].index, 9u);
  // Progress texts went first; a node with room keeps every GPU.
  EXPECT_EQ(back.ranks[0].progress->text, "");
  EXPECT_EQ(node_status_from_json(nlohmann::json::parse(board_status_json(node, 1 << 30))).ranks[3].gpus.size(), 16u);
}

TEST(BoardStacks, DeepStacksAreCutUnderTheBoundAndReadBack) {
  std::vector<RankStacks> ranks;
  for (int r = 0; r < 4; ++r) {
    RankStacks rank;
    rank.rank = r;
    rank.node_rank = 1;
    rank.pid = 500 + r;
    for (int t = 0; t < 50; ++t) {
      ThreadStack thread;
      thread.name = "Thread " + std::to_string(t);
      for (int f = 0; f < 2000; ++f) thread.frames.push_back({std::string(300, 'f'), "x.py:" + std::to_string(f)});
      rank.threads.push_back(thread);
    }
    ranks.push_back(rank);
  }
  const std::string text = board_stacks_json(ranks);
  EXPECT_LE(text.size(), kBoardStacksBytes);
  std::vector<RankStacks> back = board_stacks_from_json(text);
  ASSERT_EQ(back.size(), 4u) << "every rank kept: fewer frames and threads were enough";
  EXPECT_EQ(back[3].pid, 503);
  ASSERT_FALSE(back[0].threads.empty());
  EXPECT_EQ(back[0].threads[0].frames[0].location, "x.py:0") << "innermost frames kept";
  EXPECT_EQ(back[0].threads[0].frames[0].function.size(), 200u);
}

TEST(BoardStacks, NoRanksIsAnEmptyList) {
  EXPECT_EQ(board_stacks_json({}), "[]");
  EXPECT_TRUE(board_stacks_from_json("[]").empty());
}

// Another node's answer nested 100,000 deep is refused as not JSON before a value is built (the
// reader names that node's answer as not stacks).
TEST(BoardStacks, AnAnswerNestedTooDeepIsRefusedAsNotJson) {
  EXPECT_THROW(board_stacks_from_json("[" + std::string(100000, '[') + std::string(100000, ']') + "]"),
               nlohmann::json::parse_error);
}

}  // namespace
}  // namespace ddprun::launcher

// Bounding what a node publishes on the job board: cut texts first, then drop detail, never
// publish something the board (or a reader of many nodes) would refuse.
#include "launcher/observe/board_status.hpp"

#include <nlohmann/json.hpp>

#include "common/bounded_json.hpp"
#include "launcher/observe/status_json.hpp"

namespace ddprun::launcher {
namespace {

/// `text` cut to at most `bytes`, on a UTF-8 character boundary.
void cut(std::string& text, std::size_t bytes) {
  if (text.size() <= bytes) return;
  std::size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
}

/// Whether a GPU keeps its place on the board when room is short: the rank works on it (holds
/// memory there, or the driver cannot say) or it has a problem. A rank that sees every GPU of a
/// big node (no CUDA_VISIBLE_DEVICES, as under torchrun) would otherwise fill the board with the
/// GPUs of the other ranks.
bool gpu_worth_keeping(const RankGpu& gpu) { return !gpu.problem.empty() || gpu.own_memory_bytes.value_or(1) > 0; }

std::string status_text(const NodeStatus& node) { return to_json(node).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string stacks_text(const std::vector<RankStacks>& ranks) {
  nlohmann::json list = nlohmann::json::array();
  for (const RankStacks& rank : ranks) list.push_back(to_json(rank));
  return list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string board_status_json(NodeStatus node, std::size_t max_bytes) {
  cut(node.host, 255);
  cut(node.gpu_note, kStatusGpuTextBytes);
  for (RankStatus& rank : node.ranks) {
    if (rank.progress) cut(rank.progress->text, 64);
    for (RankGpu& gpu : rank.gpus) cut(gpu.problem, kStatusGpuTextBytes);
  }
  std::string text = status_text(node);
  if (text.size() <= max_bytes) return text;
  for (RankStatus& rank : node.ranks) {
    if (rank.progress) rank.progress->text.clear();
  }
  text = status_text(node);
  if (text.size() <= max_bytes) return text;
  for (RankStatus& rank : node.ranks) std::erase_if(rank.gpus, [](const RankGpu& gpu) { return !gpu_worth_keeping(gpu); });
  text = status_text(node);
  while (text.size() > max_bytes && !node.ranks.empty()) {
    node.ranks.pop_back();
    text = status_text(node);
  }
  return text;
}

std::string board_stacks_json(std::vector<RankStacks> ranks, std::size_t max_bytes) {
  for (RankStacks& rank : ranks) {
    cut(rank.error, 1000);
    cut(rank.file, 1000);
    for (ThreadStack& thread : rank.threads) {
      cut(thread.name, 200);
      for (StackFrame& frame : thread.frames) {
        cut(frame.function, 200);
        cut(frame.location, 200);
      }
    }
  }
  for (std::size_t frames : {std::size_t{64}, std::size_t{16}, std::size_t{4}}) {
    for (RankStacks& rank : ranks) {
      for (ThreadStack& thread : rank.threads) {
        if (thread.frames.size() > frames) thread.frames.resize(frames);  // innermost first: the outer ones go
      }
    }
    std::string text = stacks_text(ranks);
    if (text.size() <= max_bytes) return text;
  }
  // Only the first thread of each rank (the main thread, as captured first).
  for (RankStacks& rank : ranks) {
    if (rank.threads.size() > 1) rank.threads.resize(1);
  }
  std::string text = stacks_text(ranks);
  while (text.size() > max_bytes && !ranks.empty()) {
    ranks.pop_back();
    text = stacks_text(ranks);
  }
  return text;
}

std::vector<RankStacks> board_stacks_from_json(const std::string& text) {
  std::vector<RankStacks> ranks;
  for (const nlohmann::json& rank : common::parse_bounded_json(text)) ranks.push_back(rank_stacks_from_json(rank));
  return ranks;
}

}  // namespace ddprun::launcher

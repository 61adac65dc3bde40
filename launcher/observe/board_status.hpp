#pragma once
/// What a node puts on the job board (rendezvous/job_board.hpp) for the other agents: its status
/// sample and its answer to a stack request, as JSON text that stays under a byte bound whatever
/// the workers report (a progress text, a deep stack). Pure: no I/O, tested by table.
#include <cstddef>
#include <string>
#include <vector>

#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

/// The most one node's status takes on the board: far below the board's value limit, so that the
/// once-a-second publish and the readers' reads stay small for a node of many ranks.
inline constexpr std::size_t kBoardStatusBytes = 64 * 1024;
/// The most one node's stacks answer takes (the board refuses values over 256 KiB).
inline constexpr std::size_t kBoardStacksBytes = 192 * 1024;

/// `node` as status JSON of at most `max_bytes`: text fields are cut (progress text to 64 bytes,
/// the host to 255, a GPU's problem and the gpu note to kStatusGpuTextBytes); should that not do,
/// the progress texts go, then each rank's GPUs that it holds no memory on and that have no problem,
/// then the last ranks. The ranks kept are whole and correct; what was cut is only shortened or missing.
std::string board_status_json(NodeStatus node, std::size_t max_bytes = kBoardStatusBytes);

/// `ranks` as a JSON list of RankStacks of at most `max_bytes`: at most 64 frames per thread and
/// 200 bytes per function or location; should that not do, fewer frames per thread, then only the
/// first thread of each rank, then the last ranks go.
std::string board_stacks_json(std::vector<RankStacks> ranks, std::size_t max_bytes = kBoardStacksBytes);

/// The inverse of board_stacks_json; throws nlohmann::json::exception on a shape that is not one.
std::vector<RankStacks> board_stacks_from_json(const std::string& text);

}  // namespace ddprun::launcher

#pragma once
/// The job's status as JSON, the one schema that /api/status, /api/stacks, `ddprun status` and the
/// multi-node status keys share. Field names are snake_case versions of job_status.hpp's members;
/// a missing optional field reads as its default, so an older agent's JSON still reads. A value
/// that is unknown (an std::optional without one) is written as null and read back as unknown.
#include <nlohmann/json.hpp>

#include <cstddef>

#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

/// What a status read from another node may hold of its GPUs, whatever its sender wrote: more is
/// left out (the first GPUs, the last Xids, the first throttle names kept), longer texts are cut.
/// A node has a few GPUs, and the monitor keeps 8 Xids per GPU: these bounds only stop a peer (or
/// a bug) from making every reader hold a copy of something large.
inline constexpr std::size_t kStatusGpusPerRank = 64;
inline constexpr std::size_t kStatusXidsPerGpu = 8;
inline constexpr std::size_t kStatusThrottleNames = 16;
inline constexpr std::size_t kStatusGpuNameBytes = 96;   ///< uuid, bus id, a throttle name
inline constexpr std::size_t kStatusGpuTextBytes = 512;  ///< a GPU's problem, the node's gpu_note

nlohmann::json to_json(const RankStatus& rank);
nlohmann::json to_json(const NodeStatus& node);
nlohmann::json to_json(const JobStatus& job);
nlohmann::json to_json(const RankStacks& stacks);

/// Throws nlohmann::json::exception (type_error, out_of_range) on a shape that is not a status.
RankStatus rank_status_from_json(const nlohmann::json& json);
NodeStatus node_status_from_json(const nlohmann::json& json);
JobStatus job_status_from_json(const nlohmann::json& json);
RankStacks rank_stacks_from_json(const nlohmann::json& json);

}  // namespace ddprun::launcher

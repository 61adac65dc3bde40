#pragma once
/// The job's status as JSON, the one schema that /api/status, /api/stacks, `ddprun status` and the
/// multi-node status keys share. Field names are snake_case versions of job_status.hpp's members;
/// a missing optional field reads as its default, so an older agent's JSON still reads.
#include <nlohmann/json.hpp>

#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

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

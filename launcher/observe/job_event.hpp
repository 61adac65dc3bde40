#pragma once
/// The job's life as events: what `--events FILE` writes (one JSON object per line), what the
/// status page's timeline shows, and what `ddprun trace` turns into a Chrome trace. The agent
/// records them where they happen; readers (the event log, the status endpoint) subscribe through
/// JobEventSink. No I/O here.
#include <sys/types.h>

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ddprun::launcher {

enum class JobEventKind {
  job_started,     ///< the agent began (detail: command, nproc, nnodes)
  round_formed,    ///< multi-node: a rendezvous round formed (detail: round, nodes, world_size)
  node_joined,     ///< multi-node: a node is in the round (node_rank)
  node_lost,       ///< multi-node: a node left or stopped answering (node_rank, detail: reason)
  worker_started,  ///< rank, pid (detail: local_rank, attempt, warm: a --preload interpreter became it)
  worker_exited,   ///< rank, pid (detail: exitcode, description)
  restart,         ///< the group restarts (detail: restart count, reason)
  hang_detected,   ///< no rank progressed for --hang-timeout (detail: idle_seconds, action)
  straggler,       ///< rank (detail: rate, median)
  stacks_written,  ///< rank (detail: file)
  job_finished,    ///< detail: exit_status
};

/// "round_formed": the name in JSON.
const char* job_event_name(JobEventKind kind);
std::optional<JobEventKind> parse_job_event_name(const std::string& name);

struct JobEvent {
  double time = 0;  ///< unix time, seconds (microsecond resolution)
  JobEventKind kind = JobEventKind::job_started;
  int node_rank = -1;  ///< -1: not about one node
  int rank = -1;       ///< global rank; -1: not about one rank
  pid_t pid = 0;
  nlohmann::json detail = nlohmann::json::object();
};

/// {"time":..., "event":"worker_exited", "node_rank":0, "rank":1, "pid":123, ...detail's members}:
/// detail's members sit beside the fixed ones (a detail member never replaces a fixed one).
nlohmann::json to_json(const JobEvent& event);
/// Throws nlohmann::json::exception or std::invalid_argument (unknown "event") on a bad line.
JobEvent job_event_from_json(const nlohmann::json& json);

/// Where the agent sends its events. Implementations must not block the agent's loop.
class JobEventSink {
 public:
  virtual ~JobEventSink() = default;
  virtual void record(const JobEvent& event) = 0;
};

}  // namespace ddprun::launcher

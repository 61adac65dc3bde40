#pragma once
/// The event log (--events, JSON Lines of job_event.hpp) as a Chrome trace (the Trace Event
/// Format's JSON object form), which Perfetto (ui.perfetto.dev) and chrome://tracing open: the
/// job's life on a timeline. Pure: text in, values out; `ddprun trace` (trace_command.hpp) does
/// the files.
///
/// The picture: a process per node ("node 0 (host)"), in it an "agent" track (thread 0) and a
/// track per global rank ("rank 3", thread rank+1).
/// - Each worker's life is a complete event ("X") on its rank's track, from worker_started to the
///   worker_exited of the same pid on the same node, named "rank R" + its attempt, with its pid,
///   exit code and description in args; a failure of its own is coloured bad ("cname"). A worker
///   with no exit in the log (the log ends while it runs) lasts to the log's last event.
/// - On the agent track: the job ("X" from job_started to job_finished, exit status in args),
///   each round ("X" from round_formed to the node's next round_formed or job_finished), and
///   restarts, hangs, node joined / lost as instant events ("i").
/// - Stragglers and stacks written are instant events on their rank's track.
/// Times are microseconds since the log's first event (its unix time is in "otherData").
/// Agents of one job may share a file, or their files be read together: events about a node that
/// several agents recorded (node joined / lost) appear once.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/observe/job_event.hpp"

namespace ddprun::launcher {

struct BadEventLine {
  std::size_t line = 0;  ///< 1-based
  std::string why;
};

struct EventLines {
  std::vector<JobEvent> events;  ///< in the file's order
  std::vector<BadEventLine> bad;
};

/// The events of JSON Lines text; blank lines are skipped, any other line that is not an event
/// (not JSON, no "event" or "time", an unknown event) is in `bad` with its number and why.
EventLines read_event_lines(std::string_view text);

/// The Chrome trace of `events` (any order: they are sorted by time, stably).
nlohmann::json chrome_trace(std::vector<JobEvent> events);

}  // namespace ddprun::launcher

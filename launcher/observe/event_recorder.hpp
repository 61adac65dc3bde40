#pragma once
/// EventRecorder: where the job's events (job_event.hpp) are stamped and handed on — to the ring of
/// recent events the status endpoint serves, and to every sink (`--events FILE`). The agent tells it
/// what happened (a worker started or exited, a round formed or ended, a restart); it works out the
/// event, and for a round, which nodes joined or were lost. On the agent's loop; never blocks
/// (sinks must not).
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/observe/attempt_view.hpp"
#include "launcher/observe/job_event.hpp"
#include "launcher/observe/recent_events.hpp"
#include "rendezvous/round_record.hpp"

namespace ddprun::launcher {

class EventLog;

/// What job_started says of the job, fixed for its life.
struct JobFacts {
  std::string run_id;
  std::string host;
  int nproc_per_node = 1;
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  std::vector<std::string> command;
  bool multi_node = false;
  /// A static multi-node job's node rank, known from the start; nullopt: a round will say.
  std::optional<int> static_node_rank;
};

/// A worker's end, as the worker_exited event tells it.
struct WorkerEnd {
  int local_rank = 0;
  pid_t pid = 0;
  int exitcode = 0;          ///< torchrun's convention (-N: signal N)
  int stop_signal_sent = 0;  ///< the signal ddprun had sent it, 0: none
  bool failed = false;       ///< a failure of its own, not the end ddprun gave it (failure_rule.hpp)
};

class EventRecorder {
 public:
  using Warn = std::function<void(const std::string& line)>;

  EventRecorder(boost::asio::io_context& io, JobFacts facts, const AttemptView& attempt, Warn warn);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  /// --events FILE: opened now, before anything starts, so that an unusable file fails the job at
  /// once (throws LaunchError naming it).
  void open_log(const std::string& file);

  /// Hands `event` to the recent-events ring and every sink, in the order recorded. Stamps `time`
  /// (unix seconds) when 0, and `node_rank` with this node's (its group rank in the last round;
  /// -1 before a dynamic job's first round) when -1, except for node_joined / node_lost, which
  /// name the node they are about.
  void record(JobEvent event);
  /// `sink` gets every event recorded from now on; it must outlive the recorder's use.
  void add_sink(JobEventSink* sink);
  const RecentEvents& recent() const { return recent_; }

  void job_started();
  void job_finished(int exit_status, int restarts);
  /// A worker group starts. Unless it is the first: a restart event, with its count and why — the
  /// round's end (multi-node), `first_failure` (the last attempt's first failed rank and its
  /// exitcode), or the hang that --hang-action restart acts on.
  void group_starting(std::optional<std::pair<int, int>> first_failure);
  void worker_started(int local_rank, pid_t pid, bool warm = false);
  void worker_exited(const WorkerEnd& end);
  /// A round formed: round_formed, then the nodes new in it joined and those gone from the last
  /// round lost.
  void round_formed(const rendezvous::RoundDecision& decision);
  /// A round ended for a node lost or gone (node_lost, now rather than at the next round); `self`
  /// is this node's id. Any end is the next restart's reason.
  void round_ended(const rendezvous::RoundEnd& end, const std::string& self);

  /// Calls `done` once, on the loop, when the event log has written what it holds (or after
  /// `patience`); at once without a log.
  void when_drained(std::function<void()> done, std::chrono::milliseconds patience);

 private:
  boost::asio::io_context& io_;
  JobFacts facts_;
  const AttemptView& attempt_;
  Warn warn_;
  RecentEvents recent_;  ///< always kept: the status endpoint's timeline
  std::unique_ptr<EventLog> log_;
  std::vector<JobEventSink*> sinks_;
  int node_rank_ = 0;  ///< what record() stamps: this node's rank as last known
  std::optional<rendezvous::RoundDecision> last_round_;  ///< multi-node: the nodes of the last round
  std::vector<std::string> nodes_said_lost_;  ///< ids of that round's nodes already recorded lost
  std::string restart_reason_;                 ///< multi-node: why the last round ended
  bool started_a_group_ = false;               ///< a group started before: the next one is a restart
};

}  // namespace ddprun::launcher

#pragma once
/// Agent: the I/O shell of one node, one event loop. Child exits, signals, rendezvous outcomes and
/// timers become supervisor events (supervisor.hpp); the supervisor's actions become processes,
/// store requests and console lines. Nothing here decides what happens next, and nothing polls.
///
/// A single-node job hosts its store on the master port and clears it per attempt (agent.cpp). A
/// multi-node job (several nodes, or c10d) goes through rendezvous rounds (NodeRounds, performed in
/// agent_rounds.cpp): each round's decision gives this node its ranks and the workers' store.
///
/// The Agent owns its parts and hands each what it needs: the terminals (JobTerminal), each
/// attempt's workers (WorkerPreparation, then a WorkerGroup), the attempt's failures
/// (FailureRecord) and the rounds (NodeRounds); they report back through callbacks.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/output/console_output.hpp"
#include "launcher/base/environ.hpp"
#include "launcher/report/failure_record.hpp"
#include "launcher/report/failure_summary.hpp"
#include "launcher/observe/attempt_view.hpp"
#include "launcher/observe/job_status.hpp"
#include "launcher/cli/launch_config.hpp"
#include "launcher/cli/program.hpp"
#include "launcher/observe/recent_events.hpp"
#include "launcher/output/run_logs.hpp"
#include "launcher/signal_origin.hpp"
#include "launcher/supervisor.hpp"
#include "launcher/base/unique_fd.hpp"
#include "launcher/workers/worker_preparation.hpp"
#include "launcher/workers/worker_spec.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/job_board.hpp"  // the Agent owns one (agent_board.cpp); its destructor is in agent.cpp

namespace ddprun::rendezvous {
class NodeMembership;
class StoreServer;
}

namespace ddprun::launcher {

class EventLog;
class Guardian;
class JobCgroup;
class JobTerminal;
class NodeRounds;
class WorkerGroup;

/// Everything decided before the first worker starts (so that bad input fails before anything runs).
struct AgentPlan {
  LaunchConfig config;  ///< resolved: topology, devices per local rank, rendezvous settings, store token
  WorkerCommand command;
  Environ env;
  std::string hostname;
};

class StatusMonitor;
struct StatusMonitorSettings;
struct NodeStatus;
struct StatusEndpoint;
class HangRule;
class CaptureQueue;
struct CapturedRank;
struct StackTarget;
struct JobStatus;
struct StacksReply;

class Agent {
 public:
  explicit Agent(AgentPlan plan);
  ~Agent();

  /// Runs the job to its end; returns ddprun's exit status. Throws LaunchError when the job
  /// cannot start at all (log folder, busy port).
  int run();

 private:
  /// Hands `event` to the supervisor and performs its actions. An event raised while actions are
  /// performed waits for them, so that the supervisor sees events one at a time, in order.
  void dispatch(SupervisorEvent event);
  void perform(const SupervisorAction& action);

  // What the actions do (agent.cpp, agent_rounds.cpp).
  void start_attempt();
  /// Waits for the console to take the last lines, then stops the loop (run() returns the status).
  void finish(bool impatient);
  void enter_round(const rendezvous::RoundDecision& decision);
  void close_round();

  void start_store();
  /// Multi-node: the rounds started (a busy store port fails here), their outcomes as events.
  void start_rendezvous();
  void wait_child_exits();
  void wait_stop_signals();
  /// A --forward-signals signal: passed on to the running workers unless its sender signals them too.
  void on_forwarded_signal(const SignalOrigin& origin);
  void on_worker_exit(const WorkerExit& exit);
  /// Kills and reaps every process the job left, and lets the guardian go: the end of run().
  void clean_up();
  /// Ended by a signal: stops the loop once a console has taken nothing for a moment.
  void give_up_on_a_stalled_console();

  // The job's events (agent_events.cpp).
  /// Hands `event` to the recent-events ring and every sink, in the order recorded. Stamps `time`
  /// (unix seconds) when 0, and `node_rank` with this node's (its group rank in the last round;
  /// -1 before a dynamic job's first round) when -1, except for node_joined / node_lost, which
  /// name the node they are about. On the loop; never blocks (sinks must not).
  void record_event(JobEvent event);
  /// `sink` gets every event recorded from now on; it must outlive the agent's loop.
  void add_event_sink(JobEventSink* sink);
  /// The rounds' node events: nodes new in `decision` joined, nodes gone from the last round lost.
  void record_round_events(const rendezvous::RoundDecision& decision);
  /// A round ended for a node lost or gone: node_lost, now rather than at the next round.
  void record_round_end(const rendezvous::RoundEnd& end);
  /// --events FILE: opened before anything starts (an unusable file fails the job at once).
  void open_event_log();
  void record_job_started();
  void record_job_finished();
  /// A worker group that is not this agent's first: restart, with its count and why.
  void record_restart();
  void record_worker_started(int local_rank, pid_t pid);
  void record_worker_exited(const WorkerExit& exit);

  // Status (agent_status.cpp): the monitor's samples, the console's status block and lines.
  /// Makes the monitor when something reads its samples (status_wanted); before the first attempt.
  void start_status();
  /// The status monitor, sampling this node's workers into on_status_sample (start_status, or the
  /// first reader of the status when nothing asked for it at the start).
  void make_status_monitor(const StatusMonitorSettings& settings);
  /// Whether anything reads the samples: the status block, --status-interval; each other reader
  /// (the hang watch, the status endpoint) adds its condition here.
  bool status_wanted() const;
  void status_attempt_started();
  void status_worker_exited(const WorkerExit& exit);
  /// Each sample, about once a second: the one place a NodeStatus goes. Each reader adds one line.
  void on_status_sample(const NodeStatus& node);
  void show_status(const NodeStatus& node);
  /// A rank newly named a straggler: a straggler event and a line.
  void note_stragglers(const NodeStatus& node);
  /// The job ends: no more samples, the status block taken off the terminal.
  void end_status();

  // Hang watch (agent_hang.cpp): --hang-timeout, every rank's stacks, the digest, --hang-action.
  /// Each status sample goes through the hang rule; a hang newly found is a HangDetected event.
  void watch_for_hang(const NodeStatus& node);
  /// ddprun's Python folder first on the worker's PYTHONPATH; its faulthandler's file in `dir`.
  void add_python_hooks(WorkerSpec& spec, const std::filesystem::path& dir);
  /// CaptureStacks: the digest once every rank can be placed, the files once all are in, then
  /// StacksCaptured.
  void capture_stacks();
  /// What a capture of `node`'s running ranks attaches to (pids, this node's rank, each rank's
  /// Python stacks file): the one list the hang, the endpoint and the board captures all use.
  std::vector<StackTarget> stack_targets(const NodeStatus& node) const;
  /// The agent's one capture queue (capture_queue.hpp), made at its first use: ddprun-unwind when
  /// it sits beside ddprun, else gdb.
  CaptureQueue& captures();
  void print_hang_digest(const std::vector<CapturedRank>& ranks);
  void write_stack_files(const std::vector<CapturedRank>& ranks);
  /// PrintFailureSummary: the workers' failures, and the hang that ended the job when one did.
  void print_failure_summary();

  AgentPlan plan_;
  boost::asio::io_context io_;
  SupervisorState state_;
  std::deque<SupervisorEvent> pending_events_;
  bool dispatching_ = false;

  /// Made before anything else (the guardian must be forked before any thread exists).
  std::unique_ptr<JobCgroup> cgroup_;
  std::unique_ptr<Guardian> guardian_;
  /// ddprun's stdout and stderr, never blocking the loop; installed while it runs.
  std::optional<ConsoleOutput> console_;
  boost::asio::steady_timer finish_timer_;
  boost::asio::signal_set child_exits_;
  boost::asio::signal_set stop_signals_;
  std::optional<SignalOriginSet> forwarded_signals_;  ///< --forward-signals, and SIGUSR1/SIGUSR2 always

  std::optional<RunLogs> logs_;
  /// The job's store, on MASTER_ADDR:MASTER_PORT for the whole job; workers are its clients
  /// (TORCHELASTIC_USE_AGENT_STORE=True). Its own thread, so store traffic never delays the agent.
  std::unique_ptr<rendezvous::StoreServer> store_;
  rendezvous::Endpoint master_;  ///< MASTER_ADDR:MASTER_PORT of this attempt: the workers' store

  /// This attempt's place in the job (single node: rank base 0, one node). `attempt` is the log
  /// folder's attempt_<n>: the restart count, or the round (multi-node).
  AttemptView place_;

  std::unique_ptr<NodeRounds> rounds_;  ///< multi-node only
  std::unique_ptr<JobTerminal> terminal_;  ///< made as run() starts, once the console exists

  // Status (agent_status.cpp).
  std::unique_ptr<StatusMonitor> monitor_;  ///< null: nothing reads the samples
  bool status_block_ = false;  ///< the block is drawn (--status, a live terminal on stdout)
  bool status_color_ = false;
  std::chrono::steady_clock::time_point next_status_line_;  ///< --status-interval
  std::vector<int> stragglers_named_;  ///< ranks already reported as stragglers this attempt

  // Hang watch (agent_hang.cpp).
  std::unique_ptr<HangRule> hang_rule_;  ///< made at the first sample when --hang-timeout > 0
  std::unique_ptr<CaptureQueue> captures_;  ///< the hang's, the endpoint's and the board's captures, one at a time
  std::unique_ptr<NodeStatus> hang_sample_;  ///< the sample that showed the hang: whose stacks to take
  std::chrono::system_clock::time_point hang_time_;
  std::filesystem::path stacks_dir_;      ///< attempt_<n>/stacks of the last capture
  std::vector<std::string> hang_digest_;  ///< the last capture's digest (the failure summary repeats it)
  std::optional<std::filesystem::path> python_dir_;  ///< ddprun's Python folder, looked up once
  bool python_dir_looked_up_ = false;

  std::unique_ptr<WorkerGroup> group_;
  /// What each attempt's workers start with; declared after group_ so that the attempt's log files
  /// close before the group goes.
  WorkerPreparation workers_;
  FailureRecord failure_record_;  ///< this attempt's failures, the job's unwritable log files

  // What the observability wings (agent_status, agent_hang, agent_board, agent_endpoint,
  // agent_events) read by their old names, until they are classes of their own (issue 24): aliases
  // of the state above, not state. Not to be used by new code.
  int& rank_base_ = place_.rank_base;
  int& world_size_ = place_.world_size;
  int& group_rank_ = place_.group_rank;
  int& attempt_ = place_.attempt;
  const std::vector<WorkerFailure>& failures_ = failure_record_.failures();
  rendezvous::NodeMembership* membership_ = nullptr;  ///< the rounds' membership while the loop runs

  // Job events (agent_events.cpp).
  RecentEvents recent_events_;  ///< always kept: the status endpoint's timeline
  std::unique_ptr<EventLog> event_log_;  ///< --events FILE
  std::vector<JobEventSink*> event_sinks_;
  int event_node_rank_ = 0;  ///< what record_event stamps: this node's rank as last known
  std::optional<int> local_rank_starting_;  ///< the worker just prepared, whose pid on_spawned tells
  std::optional<rendezvous::RoundDecision> last_round_;  ///< multi-node: the nodes of the last round
  std::vector<std::string> nodes_said_lost_;  ///< ids of that round's nodes already recorded lost
  std::string restart_reason_;  ///< multi-node: why the last round ended, for the restart event
  bool started_a_group_ = false;  ///< a worker group was started before: the next one is a restart

  // Status endpoint (agent_endpoint.cpp): the run's Unix socket that `ddprun status` reads, the
  // run's registry entry, --status-port.
  class EndpointView;
  /// Serves the endpoint and registers the run; once the log folder exists (the socket goes in it).
  /// Throws LaunchError when --status-port cannot be had.
  void start_status_endpoint();
  /// The status monitor, made now when nothing had asked for samples before.
  void ensure_status_samples();
  std::unique_ptr<StatusEndpoint> endpoint_;

  // Job board (agent_board.cpp), multi-node only: each node's status and stacks on the rendezvous
  // store, so that any agent's endpoint serves the whole job.
  /// A new round: a board of its own (the last round's goes), and status samples from now on.
  void open_board(const rendezvous::RoundDecision& decision);
  /// The round ends: its board goes; stack requests still gathering are answered with an error.
  void close_board();
  /// Each sample: this node's status published (bounded), the others' read into board_others_,
  /// and a new stack request answered.
  void board_sample(const NodeStatus& node);
  /// The other nodes' latest statuses added to `job` (this node's is there), by node rank.
  void add_board_nodes(JobStatus& job) const;
  /// Captures this node's running ranks' stacks (or joins the capture under way); `done` later,
  /// on the loop.
  void capture_own_stacks(std::function<void(std::vector<RankStacks>)> done);
  /// Captures this node's ranks and publishes them as its answer to `request`.
  void answer_stack_request(std::int64_t request);
  /// Every node's stacks: a request on the board, then each node's answer (up to 10 s); `done`
  /// once, later, on the loop. Only while board_ exists.
  void board_stacks(std::function<void(StacksReply)> done);
  /// A hang in a multi-node job: asks every other node for its stacks and prints the whole job's
  /// digest (`own`: the hang's capture here), which the failure summary then shows; a node that
  /// does not answer within the wait is named in it. `then` once that is done or failed, also when
  /// the board closes first. False (nothing done) without a board of two nodes or more.
  bool gather_hang_stacks(std::vector<RankStacks> own, std::function<void()> then);
  void finish_hang_gather();
  /// The other nodes' answers to `request`: read in short turns until all are there or
  /// kStacksWait is over, so that the board checks for other nodes' requests between turns.
  /// `done` is not called when the board closes first (board_stacks' and the gather's waiters
  /// are told by close_board).
  void read_other_stacks(int round, std::int64_t request, std::function<void(rendezvous::BoardRead)> done);
  std::function<void()> hang_gather_then_;  ///< the gather's `then`, until it is called
  std::unique_ptr<rendezvous::JobBoard> board_;
  int board_round_ = -1;
  int board_nodes_ = 0;
  std::vector<NodeStatus> board_others_;  ///< the other nodes' statuses as last read
  bool board_reading_ = false;            ///< a read of the statuses is under way
  bool board_checking_ = false;           ///< a look for a new stack request is under way
  std::int64_t board_answered_ = 0;       ///< the newest stack request this node answered
  std::vector<std::int64_t> board_own_requests_;  ///< requests this node made, answered by its asker
  std::vector<std::function<void(StacksReply)>> board_stacks_waiting_;
};

}  // namespace ddprun::launcher

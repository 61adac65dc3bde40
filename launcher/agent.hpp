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
/// (FailureRecord) and the rounds (NodeRounds); and what it sees of the job, one part per concern
/// (observe/: EventRecorder, StatusWatch, NodeStacks, BoardLink, HangWatch, StatusService). They
/// report back through callbacks.
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
#include "launcher/cli/launch_config.hpp"
#include "launcher/cli/program.hpp"
#include "launcher/output/run_logs.hpp"
#include "launcher/signal_origin.hpp"
#include "launcher/supervisor.hpp"
#include "launcher/base/unique_fd.hpp"
#include "launcher/workers/worker_preparation.hpp"
#include "launcher/workers/worker_spec.hpp"
#include "rendezvous/endpoint.hpp"

namespace ddprun::rendezvous {
class NodeMembership;
class StoreServer;
}

namespace ddprun::launcher {

class BoardLink;
class EventRecorder;
class GpuGate;
class GpuSampler;
class Guardian;
class HangWatch;
class JobCgroup;
class JobTerminal;
class NodeRounds;
class NodeStacks;
class StatusService;
class StatusWatch;
class WarmPool;
class WorkerGroup;

/// Everything decided before the first worker starts (so that bad input fails before anything runs).
struct AgentPlan {
  LaunchConfig config;  ///< resolved: topology, devices per local rank, rendezvous settings, store token
  WorkerCommand command;
  Environ env;
  std::string hostname;
};

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

  /// The GPU sampler and gate (gpu/, devices/gpu_gate.hpp), before anything can ask them.
  void start_gpu_watch();
  /// --preload: the warm interpreters, and the first attempt's started at once (before the
  /// rendezvous ends, so that their imports overlap it).
  void start_warm_pool();
  /// The specs an attempt would start now, for warming the interpreters that become them.
  std::vector<WorkerSpec> specs_to_warm() const;

  // Observability (observe/): made once the log folder exists; sampling starts with the first reader.
  void start_observers();
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

  std::unique_ptr<WarmPool> warm_;  ///< --preload only; declared before group_, which takes from it
  pid_t last_warm_pid_ = 0;         ///< the last worker a warm interpreter became (its start event says so)
  std::unique_ptr<WorkerGroup> group_;
  /// What each attempt's workers start with; declared after group_ so that the attempt's log files
  /// close before the group goes.
  WorkerPreparation workers_;
  FailureRecord failure_record_;  ///< this attempt's failures, the job's unwritable log files


  /// The one thread that makes NVML calls (gpu/gpu_sampler.hpp), made at the start so that NVML's
  /// initialisation overlaps the rendezvous; the status monitor and the GPU gate share it.
  std::unique_ptr<GpuSampler> gpu_sampler_;
  /// Before each start: the GPUs' health and the release of the stopped workers' GPU memory.
  std::unique_ptr<GpuGate> gpu_gate_;
  std::vector<pid_t> attempt_pids_;   ///< this attempt's workers, as they are spawned
  std::vector<pid_t> previous_pids_;  ///< the last stopped attempt's processes: whose GPU memory the next start waits for

  // What ddprun sees of the job (observe/), one part per concern, each given place_ and what it
  // needs; they act on the job only through the callbacks handed to them. Declared in the order
  // they are made (and unmade in reverse): each holds references to those above it.
  std::unique_ptr<EventRecorder> events_;    ///< the job's events: the recent ring, --events
  std::unique_ptr<StatusWatch> status_;      ///< samples, the status block and lines, stragglers
  std::unique_ptr<NodeStacks> stacks_;       ///< the one capture queue, the ranks' targets
  std::unique_ptr<BoardLink> board_;         ///< multi-node: each node's status and stacks on the store
  std::unique_ptr<HangWatch> hang_;          ///< --hang-timeout
  std::unique_ptr<StatusService> endpoint_;  ///< the Unix socket `ddprun status` reads, --status-port
};

}  // namespace ddprun::launcher

#pragma once
/// Agent: the I/O shell of one node, one event loop. Child exits, signals, rendezvous outcomes and
/// timers become supervisor events (supervisor.hpp); the supervisor's actions become processes,
/// store requests and console lines. Nothing here decides what happens next, and nothing polls.
///
/// A single-node job hosts its store on the master port and clears it per attempt (agent.cpp). A
/// multi-node job (several nodes, or c10d) goes through rendezvous rounds (agent_rounds.cpp): each
/// round's decision gives this node its ranks and the workers' store.
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
#include "launcher/report/failure_summary.hpp"
#include "launcher/observe/attempt_view.hpp"
#include "launcher/cli/launch_config.hpp"
#include "launcher/report/oom_watch.hpp"
#include "launcher/port_reservation.hpp"
#include "launcher/cli/program.hpp"
#include "launcher/output/run_logs.hpp"
#include "launcher/signal_origin.hpp"
#include "launcher/supervisor.hpp"
#include "launcher/base/unique_fd.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddprun::rendezvous {
class NodeMembership;
class StoreServer;
}

namespace ddprun::launcher {

class Guardian;
class JobCgroup;
class StdinForwarder;
class WorkerGroup;
struct LogWriteError;
struct WorkerRoutes;

/// Everything decided before the first worker starts (so that bad input fails before anything runs).
struct AgentPlan {
  LaunchConfig config;  ///< resolved: topology, devices per local rank, rendezvous settings, store token
  WorkerCommand command;
  Environ env;
  std::string hostname;
};

class BoardLink;
class EventRecorder;
class HangWatch;
class NodeStacks;
class StatusService;
class StatusWatch;

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
  void begin_join();
  void enter_round(const rendezvous::RoundDecision& decision);
  void close_round();
  void leave(rendezvous::RoundEnd end);

  void start_store();
  std::vector<WorkerSpec> worker_specs() const;
  /// --numa-binding: decides numa_cpus_ and prints why any worker is left unbound.
  void plan_numa_binding();
  /// --duplicate-std*-filters: opens the attempt's filtered files (into attempt_log_files_).
  void open_filtered_files();
  WorkerRoutes open_routes(int local_rank, const std::filesystem::path& dir);
  void wait_child_exits();
  void wait_stop_signals();
  /// A --forward-signals signal: passed on to the running workers unless its sender signals them too.
  void on_forwarded_signal(const SignalOrigin& origin);
  /// -v: the launch config, as torchrun logs it with LOGLEVEL=INFO (verbose.hpp).
  void print_launch_config() const;
  void on_worker_exit(const WorkerExit& exit);
  void on_log_error(const LogWriteError& error);
  /// Kills and reaps every process the job left, and lets the guardian go: the end of run().
  void clean_up();
  /// Ended by a signal: stops the loop once a console has taken nothing for a moment.
  void give_up_on_a_stalled_console();
  WorkerFailure describe_failure(const WorkerExit& exit);

  // Multi-node (agent_rounds.cpp).
  void start_rendezvous();
  void accept_probes();

  // Terminals (agent_terminal.cpp): a pty per worker, ddprun's stdin forwarded, window size passed on.
  void set_up_terminals();
  void wait_suspensions();
  /// SIGSTOP to every worker's process group, ddprun stops itself; once continued, SIGCONT to them.
  void suspend_job();
  void wait_window_changes();

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
  std::vector<LogWriteError> log_errors_;
  boost::asio::signal_set child_exits_;
  boost::asio::signal_set stop_signals_;
  std::optional<SignalOriginSet> forwarded_signals_;  ///< --forward-signals, and SIGUSR1/SIGUSR2 always

  std::optional<RunLogs> logs_;
  /// The job's store, on MASTER_ADDR:MASTER_PORT for the whole job; workers are its clients
  /// (TORCHELASTIC_USE_AGENT_STORE=True). Its own thread, so store traffic never delays the agent.
  std::unique_ptr<rendezvous::StoreServer> store_;
  std::string master_addr_;
  int master_port_number_ = 0;
  OomWatch oom_;
  std::optional<std::uint64_t> oom_kills_seen_;  ///< OOM-kill count already accounted for

  /// This attempt's place in the job (single node: rank base 0, one node); the observers read it.
  AttemptView place_;
  /// Workers share the agent store across rounds (static, --worker-store agent): their
  /// TORCHELASTIC_RESTART_COUNT, PyTorch's key prefix, is the round (place_.attempt), new every round.
  bool attempt_is_round_ = false;

  // Multi-node only.
  std::unique_ptr<rendezvous::NodeMembership> membership_;
  std::optional<boost::asio::ip::tcp::acceptor> probe_acceptor_;  ///< presence port: connects succeed while we live
  std::string bind_host_;                                          ///< wildcard of the advertised address's family
  std::optional<PortReservation> next_worker_store_;               ///< candidate port for the next round
  std::unique_ptr<rendezvous::StoreServer> worker_store_;          ///< this round's, on group rank 0
  int previous_rank_ = -1;
  bool linger_store_ = false;  ///< the job ended: keep hosting the store until the others have left
  std::chrono::milliseconds close_timeout_{30000};  ///< rdzv close_timeout: the most leave() waits
  std::optional<boost::asio::steady_timer> close_timer_;

  WorkerTerminal worker_terminal_ = WorkerTerminal::pipes;
  std::unique_ptr<StdinForwarder> stdin_;  ///< null: --stdin none
  std::optional<boost::asio::signal_set> window_changes_;
  std::optional<boost::asio::signal_set> suspensions_;  ///< SIGTSTP: pause the job (Ctrl-Z)
  bool pty_warned_ = false;

  std::unique_ptr<WorkerGroup> group_;
  std::optional<WorkerSpec> being_started_;  ///< -v: the worker prepared, named when its pid is known
  /// `--numa-binding`: each local rank's CPUs (empty: not bound), decided once before the first start.
  std::vector<std::vector<int>> numa_cpus_;
  /// `--duplicate-std*-filters`: the attempt's filtered_stdout.log / filtered_stderr.log, shared by
  /// its workers; owned by attempt_log_files_; -1: none.
  int filtered_stdout_fd_ = -1;
  int filtered_stderr_fd_ = -1;
  std::vector<UniqueFd> attempt_log_files_;
  std::vector<std::string> error_files_;  ///< per local rank, this attempt
  std::vector<WorkerFailure> failures_;   ///< this attempt's recorded failures, first observed first

  bool libtorch_1_ = false;  ///< the program links LibTorch 1.x (WorkerSpec::libtorch_1), read once
  std::optional<int> local_rank_starting_;  ///< the worker just prepared, whose pid on_spawned tells

  // What ddprun sees of the job (observe/), one part per concern, each given place_ and what it
  // needs; they act on the job only through the callbacks handed to them. Declared in the order
  // they are made (and unmade in reverse): each holds references to those above it.
  std::unique_ptr<EventRecorder> events_;   ///< the job's events: the recent ring, --events
  std::unique_ptr<StatusWatch> status_;     ///< samples, the status block and lines, stragglers
  std::unique_ptr<NodeStacks> stacks_;      ///< the one capture queue, the ranks' targets
  std::unique_ptr<BoardLink> board_;        ///< multi-node: each node's status and stacks on the store
  std::unique_ptr<HangWatch> hang_;         ///< --hang-timeout
  std::unique_ptr<StatusService> endpoint_;  ///< the Unix socket `ddprun status` reads, --status-port
};

}  // namespace ddprun::launcher

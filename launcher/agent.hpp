#pragma once
/// Agent: the state machine of one node, in one event loop. Starts the worker group, watches it,
/// and on the first failure stops it and either restarts it (restarts left) or fails the job.
/// Child exits, output, signals and timers are all events: nothing polls.
///
/// A single-node job hosts its store on the master port and clears it per attempt (agent.cpp). A
/// multi-node job (several nodes, or c10d) goes through rendezvous rounds (agent_rounds.cpp): each
/// round's decision gives this node its ranks and the workers' store, and each round ends on every
/// node at once (a failure anywhere, a node lost or joining, the job finished or failed).
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/console_output.hpp"
#include "launcher/environ.hpp"
#include "launcher/failure_summary.hpp"
#include "launcher/guardian.hpp"
#include "launcher/job_cgroup.hpp"
#include "launcher/launch_config.hpp"
#include "launcher/node_membership.hpp"
#include "launcher/oom_watch.hpp"
#include "launcher/port_reservation.hpp"
#include "launcher/program.hpp"
#include "launcher/run_logs.hpp"
#include "launcher/signal_origin.hpp"
#include "launcher/stdin_forwarder.hpp"
#include "launcher/unique_fd.hpp"
#include "launcher/worker_group.hpp"
#include "rendezvous/store_server.hpp"

namespace ddprun::launcher {

/// Everything decided before the first worker starts (so that bad input fails before anything runs).
struct AgentPlan {
  LaunchConfig config;
  WorkerCommand command;
  Environ env;
  std::vector<std::optional<std::string>> devices;  ///< CUDA_VISIBLE_DEVICES per local rank
  std::string hostname;
  /// Rendezvous rounds (several nodes, or c10d) rather than one node with its own store.
  bool multi_node = false;
  /// Where the GPU count came from (VisibleDevices::source), when the command line needed one.
  std::optional<std::string> device_source;
};

class Agent {
 public:
  explicit Agent(AgentPlan plan);

  /// Runs the job to its end; returns ddprun's exit status. Throws LaunchError when the job
  /// cannot start at all (log folder, busy port).
  int run();

 private:
  enum class Phase {
    joining,                 ///< multi-node: waiting for a round to form
    running,
    stopping_after_failure,  ///< a worker failed here, or the job cannot go on (launch, rendezvous)
    stopping_for_round_end,  ///< multi-node: the round ended elsewhere; workers stop for the next
    stopping_for_signal,
    waiting_for_others,      ///< multi-node: this node's workers succeeded; the exit barrier
  };

  void start_store();
  void start_attempt();
  std::vector<WorkerSpec> worker_specs() const;
  WorkerRoutes open_routes(int local_rank, const std::filesystem::path& dir);

  void wait_child_exits();
  void wait_stop_signals();
  /// A --forward-signals signal: passed on to the running workers unless its sender signals them too.
  void on_forwarded_signal(const SignalOrigin& origin);
  /// -v: the launch config, as torchrun logs it with LOGLEVEL=INFO (verbose.hpp).
  void print_launch_config() const;
  void on_worker_exit(const WorkerExit& exit);
  void on_start_failed(const std::string& message);
  void on_log_error(const LogWriteError& error);
  /// Kills and reaps every process the job left, and lets the guardian go: the end of run().
  void clean_up();
  void on_stop_signal(int signo);
  void on_group_done();
  void finish(int exit_status);
  /// Ended by a signal: stops the loop once a console has taken nothing for a moment.
  void give_up_on_a_stalled_console();

  // Multi-node rounds (agent_rounds.cpp).
  void start_rendezvous();
  void accept_probes();
  void begin_join();
  void on_round(const rendezvous::RoundDecision& decision);
  void on_round_end(int round, const rendezvous::RoundEnd& end);
  void on_rendezvous_error(const std::string& message);
  void report_local_failure();
  void on_group_done_in_round();
  /// The group is stopped and the round's end is known: restart, finish, or fail.
  void after_round();
  /// Tells the other nodes this node is going (within close_timeout), then finishes.
  void leave(rendezvous::RoundEnd end, int exit_status);

  WorkerFailure describe_failure(const WorkerExit& exit);

  AgentPlan plan_;
  boost::asio::io_context io_;
  /// Made before anything else (the guardian must be forked before any thread exists).
  std::unique_ptr<JobCgroup> cgroup_;
  std::unique_ptr<Guardian> guardian_;
  /// ddprun's stdout and stderr, never blocking the loop; installed while it runs.
  std::optional<ConsoleOutput> console_;
  boost::asio::steady_timer finish_timer_;
  bool finishing_ = false;  ///< finish() was called: waiting for the console to take the last lines
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

  // This attempt's place in the job (single node: rank base 0, one node).
  int rank_base_ = 0;
  int world_size_ = 1;
  int group_rank_ = 0;
  int group_world_size_ = 1;
  int attempt_ = 0;  ///< the log folder's attempt_<n>: the restart count, or the round (multi-node)
  /// Workers share the agent store across rounds (static, --worker-store agent): their
  /// TORCHELASTIC_RESTART_COUNT, PyTorch's key prefix, is the round (attempt_), new every round.
  bool attempt_is_round_ = false;

  // Multi-node only.
  std::unique_ptr<NodeMembership> membership_;
  std::optional<boost::asio::ip::tcp::acceptor> probe_acceptor_;  ///< presence port: connects succeed while we live
  std::string bind_host_;                                          ///< wildcard of the advertised address's family
  std::optional<PortReservation> next_worker_store_;               ///< candidate port for the next round
  std::unique_ptr<rendezvous::StoreServer> worker_store_;          ///< this round's, on group rank 0
  std::optional<rendezvous::RoundDecision> round_;
  std::optional<rendezvous::RoundEnd> round_end_;
  int previous_rank_ = -1;
  std::string rendezvous_error_;
  bool linger_store_ = false;  ///< the job ended: keep hosting the store until the others have left
  std::optional<std::string> store_token_;           ///< DDPRUN_STORE_TOKEN(_FILE), for the workers' stores too
  std::chrono::milliseconds close_timeout_{30000};  ///< rdzv close_timeout: the most leave() waits
  std::optional<boost::asio::steady_timer> close_timer_;

  // Terminals (agent_terminal.cpp): a pty per worker, ddprun's stdin forwarded, window size passed on.
  void set_up_terminals();
  void wait_suspensions();
  /// SIGSTOP to every worker's process group, ddprun stops itself; once continued, SIGCONT to them.
  void suspend_job();
  void wait_window_changes();
  WorkerTerminal worker_terminal_ = WorkerTerminal::pipes;
  std::unique_ptr<StdinForwarder> stdin_;  ///< null: --stdin none
  std::optional<boost::asio::signal_set> window_changes_;
  std::optional<boost::asio::signal_set> suspensions_;  ///< SIGTSTP: pause the job (Ctrl-Z)
  bool pty_warned_ = false;

  std::unique_ptr<WorkerGroup> group_;
  std::optional<WorkerSpec> being_started_;  ///< -v: the worker prepared, named when its pid is known
  std::vector<UniqueFd> attempt_log_files_;
  std::vector<std::string> error_files_;  ///< per local rank, this attempt
  int restart_count_ = 0;
  Phase phase_ = Phase::running;
  std::vector<WorkerExit> pending_failures_;  ///< failures reaped in the current batch
  std::vector<WorkerFailure> failures_;       ///< this attempt's failures, first observed first
  int stop_signal_ = 0;
  std::string fatal_error_;
  int exit_status_ = 0;
};

}  // namespace ddprun::launcher

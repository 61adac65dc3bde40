#pragma once
/// Agent: the state machine of one node, in one event loop. Starts the worker group, watches it,
/// and on the first failure stops it and either restarts it (restarts left) or fails the job.
/// Child exits, output, signals and timers are all events: nothing polls.
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "environ.hpp"
#include "failure_summary.hpp"
#include "launch_config.hpp"
#include "oom_watch.hpp"
#include "port_reservation.hpp"
#include "program.hpp"
#include "run_logs.hpp"
#include "store_server.hpp"
#include "unique_fd.hpp"
#include "worker_group.hpp"

namespace ddprun::launcher {

/// Everything decided before the first worker starts (so that bad input fails before anything runs).
struct AgentPlan {
  LaunchConfig config;
  WorkerCommand command;
  Environ env;
  std::vector<std::optional<std::string>> devices;  ///< CUDA_VISIBLE_DEVICES per local rank
  std::string hostname;
};

class Agent {
 public:
  explicit Agent(AgentPlan plan);

  /// Runs the job to its end; returns ddprun's exit status. Throws LaunchError when the job
  /// cannot start at all (log folder, busy port).
  int run();

 private:
  enum class Phase { running, stopping_after_failure, stopping_for_signal };

  void start_store();
  void start_attempt();
  std::vector<WorkerSpec> worker_specs() const;
  WorkerRoutes open_routes(int local_rank, const std::filesystem::path& dir);

  void wait_child_exits();
  void wait_stop_signals();
  void wait_forwarded_signals();
  void on_worker_exit(const WorkerExit& exit);
  void on_stop_signal(int signo);
  void on_group_done();
  void finish(int exit_status);

  WorkerFailure describe_failure(const WorkerExit& exit);

  AgentPlan plan_;
  boost::asio::io_context io_;
  boost::asio::signal_set child_exits_;
  boost::asio::signal_set stop_signals_;
  boost::asio::signal_set forwarded_signals_;

  std::optional<RunLogs> logs_;
  /// The job's store, on MASTER_ADDR:MASTER_PORT for the whole job; workers are its clients
  /// (TORCHELASTIC_USE_AGENT_STORE=True). Its own thread, so store traffic never delays the agent.
  std::unique_ptr<rendezvous::StoreServer> store_;
  std::string master_addr_;
  int master_port_number_ = 0;
  OomWatch oom_;
  std::optional<std::uint64_t> oom_kills_seen_;  ///< OOM-kill count already accounted for

  std::unique_ptr<WorkerGroup> group_;
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

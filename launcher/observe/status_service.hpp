#pragma once
/// StatusService: this agent's status endpoint — what it serves (this node's latest status sample,
/// the other nodes' from the job board, the recent events, stacks captured on demand), the
/// owner-only Unix socket in the run's folder that `ddprun status` reads, the run's entry in the
/// registry, and --status-port's TCP endpoint.
///
/// Sampling costs nothing until someone asks: without another reader of the samples, the status
/// monitor is made at the first request (StatusWatch::ensure_samples), and samples once a second
/// from then on, so that a job nobody looks at polls nothing.
#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/base/environ.hpp"
#include "launcher/observe/attempt_view.hpp"
#include "launcher/observe/run_registry.hpp"
#include "launcher/observe/status_http.hpp"

namespace ddprun::launcher {

class BoardLink;
class EventRecorder;
class NodeStacks;
class RunLogs;
class StatusWatch;

struct StatusServiceSettings {
  std::string run_id;
  std::string host;                  ///< this machine's name, for the list of runs
  std::string command;               ///< the program and its arguments, for the list of runs
  std::optional<std::string> token;  ///< the store token: every TCP request must carry it
  std::string status_host;           ///< --status-host
  std::optional<int> status_port;    ///< --status-port; nullopt: the Unix socket only
};

/// The URL of --status-port's endpoint bound to `status_host`, as ddprun prints it and the run
/// registry keeps it: one a browser can open. An address meaning every address (0.0.0.0, ::) is
/// none: `host_name` (this machine's) stands in for it, loopback when that is empty.
std::string status_url(std::string_view status_host, int port, std::string_view host_name);

class StatusService : private StatusSource {
 public:
  StatusService(boost::asio::io_context& io, StatusServiceSettings settings, const Environ& env, const RunLogs& logs,
                const AttemptView& attempt, StatusWatch& status, EventRecorder& events, NodeStacks& stacks,
                BoardLink& board);
  ~StatusService() override;
  StatusService(const StatusService&) = delete;
  StatusService& operator=(const StatusService&) = delete;

  /// Serves the endpoint and registers the run; once the log folder exists (the socket goes in
  /// it). Throws LaunchError when --status-port cannot be had; a socket or registry that cannot
  /// be made is a warning (the job runs without `ddprun status` finding it).
  void start();

 private:
  JobStatus status() override;
  std::vector<JobEvent> recent_events() override;
  void capture_stacks(std::function<void(StacksReply)> done) override;

  boost::asio::io_context& io_;
  StatusServiceSettings settings_;
  const Environ& env_;
  const RunLogs& logs_;
  const AttemptView& attempt_;
  StatusWatch& status_;
  EventRecorder& events_;
  NodeStacks& stacks_;
  BoardLink& board_;
  // Destroyed in reverse: the entry first (no reader is sent to a closing socket), then the server
  // (its connections, its socket file).
  std::unique_ptr<StatusHttpServer> server_;
  std::unique_ptr<RunRegistration> registration_;
};

/// The program and its arguments, for the list of runs (at most 200 bytes).
std::string run_command_line(const std::string& program, const std::vector<std::string>& args);

}  // namespace ddprun::launcher

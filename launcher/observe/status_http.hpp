#pragma once
/// The status endpoint: an HTTP server (Boost.Beast) on the agent's own io_context, serving
///   GET /             the status page (status_page.hpp)
///   GET /api/status   the job's status (status_json.hpp) plus "events": the recent job events
///   GET /api/stacks   every rank's stacks, captured on demand, and their digest (503 when the
///                     agent cannot capture)
///   GET /metrics      Prometheus text (metrics_text.hpp)
/// on TCP (--status-port, --status-host) and on an owner-only Unix socket (`ddprun status`).
/// Who may ask is status_request.hpp's rule.
///
/// Nothing here blocks the loop, and no client can make the agent hold more than the limits say:
/// a request's header is read within request_timeout and max_header_bytes, a body is refused,
/// a reply must be taken within write_timeout, a listener holds at most max_connections (a new
/// connection then evicts the oldest one still reading its request: a flood of idle connections
/// cannot shut the owner out). A client that breaks a limit loses its connection, nothing else.
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/observe/job_event.hpp"
#include "launcher/observe/job_status.hpp"
#include "launcher/observe/metrics_text.hpp"

namespace ddprun::launcher {

namespace status_http_detail {
struct Shared;
class Listener;
}  // namespace status_http_detail

/// What a stack capture gives the endpoint.
struct StacksReply {
  std::vector<RankStacks> ranks;
  std::vector<std::string> digest;  ///< stack_digest's lines, the odd rank out first
  std::string error;                ///< not empty: nothing was captured, and why (served as 503)
};

/// What the endpoint serves (StatusService, status_service.hpp), or a test's fake. Called on the
/// loop's thread; none of it may block.
class StatusSource {
 public:
  virtual ~StatusSource() = default;
  /// The job as this agent knows it: its own node, and the others' once they publish theirs.
  virtual JobStatus status() = 0;
  /// The most recent job events, oldest first.
  virtual std::vector<JobEvent> recent_events() = 0;
  /// Captures every rank's stacks and calls `done` exactly once, on the loop, later (never from
  /// inside this call); concurrent requests may share one capture.
  virtual void capture_stacks(std::function<void(StacksReply)> done) = 0;
};

struct StatusHttpLimits {
  std::size_t max_header_bytes = 8 * 1024;  ///< request line and headers
  std::size_t max_connections = 64;         ///< per listener
  std::chrono::milliseconds request_timeout{10000};  ///< from waiting for a request to its whole header
  std::chrono::milliseconds write_timeout{10000};    ///< for the client to take a reply
  std::chrono::milliseconds stacks_timeout{120000};  ///< for a capture to answer
  std::size_t max_reply_bytes = 64 << 20;   ///< larger replies become a 500 saying so
  std::size_t max_events = 200;             ///< recent events in /api/status
};

class StatusHttpServer {
 public:
  /// `token`: when set, every TCP request must carry it (status_request.hpp). `source` must
  /// outlive the server or stop().
  StatusHttpServer(boost::asio::io_context& io, StatusSource& source, std::optional<std::string> token,
                   StatusHttpLimits limits = {});
  ~StatusHttpServer();  ///< stop()
  StatusHttpServer(const StatusHttpServer&) = delete;
  StatusHttpServer& operator=(const StatusHttpServer&) = delete;

  /// Serves on TCP `host`:`port` (0: the kernel picks); returns the port. Throws LaunchError
  /// naming the address when it cannot listen.
  int listen_tcp(const std::string& host, int port);

  /// Serves on a Unix socket at `path` (owner-only: mode 0600, and peers of another uid but root are
  /// refused). A dead socket left at `path` is replaced; a live one, or anything else, is an error.
  /// Throws LaunchError naming the path. The socket file is removed by stop().
  void listen_unix(const std::string& path);

  /// Closes the listeners and every connection, removes the Unix socket; captures still under way
  /// answer no one. Idempotent.
  void stop();

  EndpointCounters counters() const;

 private:
  boost::asio::io_context& io_;
  std::shared_ptr<status_http_detail::Shared> shared_;
  std::vector<std::shared_ptr<status_http_detail::Listener>> listeners_;
  std::string unix_path_;  ///< the socket file to remove, while it is ours
  ino_t unix_inode_ = 0;
};

}  // namespace ddprun::launcher

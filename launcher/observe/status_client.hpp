#pragma once
/// The client side of the status endpoint, for `ddprun status` and `ddprun stacks` in another
/// terminal: one GET over the Unix socket or TCP, with a deadline, and the reply bounded in size.
/// Blocking (it runs its own io_context); never used on an agent's loop.
#include <chrono>
#include <optional>
#include <string>

namespace ddprun::launcher {

/// Where an endpoint listens: a Unix socket, or TCP host and port.
struct StatusAddress {
  std::string unix_socket;  ///< set: the socket's path
  std::string host;         ///< else TCP
  int port = 0;
  /// "unix:/path" or "host:port", for messages.
  std::string describe() const;
};

struct StatusReply {
  int status = 0;  ///< the HTTP status
  std::string body;
};

/// The largest reply body read (a status of a few thousand ranks, stacks of every thread of each).
inline constexpr std::size_t kMaxStatusReplyBytes = 256 << 20;

/// GETs `target` ("/api/status"); `token` goes as `Authorization: Bearer` (TCP only). Throws
/// LaunchError naming the address when it cannot connect, or no whole reply came by `timeout`.
StatusReply fetch_status(const StatusAddress& address, const std::string& target,
                         const std::optional<std::string>& token, std::chrono::milliseconds timeout);

}  // namespace ddprun::launcher

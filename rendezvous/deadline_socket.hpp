#pragma once
/// DeadlineSocket: one blocking TCP connection whose every operation ends by a deadline. It drives
/// its own io_context with run_until(deadline), so a dead or silent peer ends in a CallFailed, never
/// a hang. Used by StoreClient, which keeps the protocol (handshake, authentication, operations).
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/deadline.hpp"

namespace ddprun::rendezvous {

/// A failed call: `reason` is "timed out after 30 s" (timed_out) or what went wrong, e.g. "the store
/// closed the connection". Internal; StoreClient's public functions turn it into StoreTimeout("store
/// H:P: <what> timed out after 30 s") or StoreError("store H:P: <what> failed: <reason>").
struct CallFailed {
  std::string reason;
  bool timed_out = false;
};

class DeadlineSocket {
 public:
  DeadlineSocket();

  /// Closes any connection, then connects to `host` (a name or an address without brackets) by
  /// `deadline`, with TCP_NODELAY. Throws CallFailed: "connecting timed out" (timed_out), "cannot
  /// resolve H: ...", or the connect error. Names resolve synchronously (getaddrinfo cannot be
  /// cancelled), bounded by the resolver's own timeouts.
  void connect(const std::string& host, int port, const Deadline& deadline);

  /// Closes the connection (errors ignored) and drops the buffered bytes.
  void close();

  /// Between calls: gives back a large read buffer, then says whether the connection can be used as
  /// it is: open, nothing buffered, and the peer has not closed it, failed, or sent bytes nobody asked
  /// for. False means: connect again.
  bool usable_between_calls();

  /// Sends all of `bytes` by `deadline`. On failure the connection is closed (a partial request may
  /// have gone out) and CallFailed is thrown: "timed out after <timeout> (sending)" or the I/O error.
  void write_all(std::string_view bytes, const Deadline& deadline);

  /// Reads until `size` bytes are buffered. False on the deadline, with nothing consumed and the
  /// connection still in step (WAIT's cancel needs that); throws CallFailed on an I/O error, with the
  /// connection closed.
  bool try_fill(std::size_t size, const Deadline& deadline);

  /// try_fill, where a deadline leaves the connection out of step: it is closed and CallFailed
  /// "timed out after <timeout>" is thrown.
  void fill(std::size_t size, const Deadline& deadline);

  /// The next `size` buffered bytes (fill them first); valid until the next read.
  const char* take(std::size_t size);

  /// Thread-safe, from any thread: ends the operation running in the owning thread now, and every
  /// later one at once, with CallFailed "interrupted" (the connection is closed). For an owner that
  /// must stop while blocked in a long WAIT.
  void interrupt();
  bool interrupted() const { return interrupted_.load(); }

 private:
  /// Runs the one pending operation until it completes or the deadline passes; then cancels it and
  /// runs its handler too, so that no handler outlives the call that owns its captures.
  void run_until(const Deadline& deadline, const bool& done);

  /// Room for `size` unread bytes from begin_, and for at least one more byte after end_.
  void make_room(std::size_t size);

  std::atomic<bool> interrupted_{false};
  boost::asio::io_context io_{1};
  boost::asio::ip::tcp::socket socket_{io_};
  std::vector<char> buffer_;  ///< received bytes in [begin_, end_)
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
};

}  // namespace ddprun::rendezvous

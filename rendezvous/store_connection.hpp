#pragma once
/// StoreConnection: one client of the store server. Detects the dialect from the first bytes,
/// decodes requests as they arrive (checking limits before buffering more), gates everything behind
/// authentication when a token is set, and writes replies and wake-ups in order. A bad request
/// closes this connection and nothing else.
///
/// What it holds stays within its ConnectionBudget (connection_budget.hpp): input of at most
/// max_input_bytes; and replies plus pushes unsent of at most max_unsent_bytes, because each
/// request runs only once its reply fits (until then the connection is not read), a reply that
/// could never fit closes it, and so does a push that does not fit (its client is not reading).
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rendezvous/connection_budget.hpp"
#include "rendezvous/key_space.hpp"
#include "rendezvous/output_queue.hpp"
#include "rendezvous/wire.hpp"

namespace ddprun::rendezvous {

class StoreConnection;

/// What all connections of one server share; used on the server's thread only.
struct ServerShared {
  explicit ServerShared(const wire::Limits& limits)
      : keys(limits), open(open_budget(limits)), unauthenticated(unauthenticated_budget(limits)) {}

  KeySpace keys;
  ConnectionBudget open;             ///< for a connection that has authenticated, or needs not
  ConnectionBudget unauthenticated;  ///< for one that must and has not yet
  std::optional<std::string> token;
  std::unordered_map<SessionId, std::weak_ptr<StoreConnection>> sessions;
  /// Called once when the last session closes, then dropped (StoreServer::wait_until_idle).
  std::function<void()> on_idle;
};

class StoreConnection : public std::enable_shared_from_this<StoreConnection> {
 public:
  StoreConnection(boost::asio::ip::tcp::socket socket, SessionId id, ServerShared& shared);

  void start();
  /// Bytes a request owes this client unasked (a WAIT wake-up, a watch push). Closes the
  /// connection instead when they do not fit in its budget: its client is not reading.
  void deliver(std::shared_ptr<const std::string> bytes);
  /// Closes the socket; pending handlers end with operation_aborted. Idempotent.
  void close();

 private:
  enum class Auth { not_required, required, challenged, done };

  void wait_readable();
  void on_readable();
  /// Runs the buffered requests in order while their replies fit, then reads again (or, when one
  /// does not fit yet, waits for a write to finish: the write handler calls this again).
  void process_input();
  /// Handles one request; returns false when the connection must close.
  bool handle(const wire::Request& request);
  bool handle_auth(const wire::Request& request);
  void flush();
  const ConnectionBudget& budget() const;
  std::size_t unsent() const { return output_.size() + writing_.size(); }

  boost::asio::ip::tcp::socket socket_;
  SessionId id_;
  ServerShared& shared_;
  std::vector<std::uint8_t> input_;
  std::size_t awaited_input_ = 0;  ///< input_ must reach this size before the next request decodes
  std::optional<wire::Dialect> dialect_;
  OutputQueue output_;   ///< replies and pushes not yet handed to the socket
  OutputQueue writing_;  ///< the write in flight
  std::vector<boost::asio::const_buffer> write_buffers_;  ///< writing_'s chunks, for the gather write
  bool write_in_flight_ = false;
  bool read_paused_ = false;  ///< the next request's reply does not fit until a write finishes
  bool validated_ = false;    ///< VALIDATE seen: it may open a connection, and only once
  bool closed_ = false;
  Auth auth_;
  std::string server_nonce_;
};

}  // namespace ddprun::rendezvous

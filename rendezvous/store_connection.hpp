#pragma once
/// StoreConnection: one client of the store server. Detects the dialect from the first bytes,
/// decodes requests as they arrive (checking limits before buffering more), gates everything behind
/// authentication when a token is set, and writes replies and wake-ups in order. A bad request
/// closes this connection and nothing else.
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "key_space.hpp"
#include "wire.hpp"

namespace ddprun::rendezvous {

class StoreConnection;

/// What all connections of one server share; used on the server's thread only.
struct ServerShared {
  KeySpace keys;
  wire::Limits limits;
  std::optional<std::string> token;
  std::unordered_map<SessionId, std::weak_ptr<StoreConnection>> sessions;
  /// Called once when the last session closes, then dropped (StoreServer::wait_until_idle).
  std::function<void()> on_idle;
};

class StoreConnection : public std::enable_shared_from_this<StoreConnection> {
 public:
  StoreConnection(boost::asio::ip::tcp::socket socket, SessionId id, ServerShared& shared);

  void start();
  /// Bytes another session's request owes this client (a WAIT wake-up, a watch push).
  void deliver(std::string_view bytes);
  /// Closes the socket; pending handlers end with operation_aborted. Idempotent.
  void close();

 private:
  enum class Auth { not_required, required, challenged, done };

  void wait_readable();
  void on_readable();
  void process_input();
  /// Handles one request; returns false when the connection must close.
  bool handle(const wire::Request& request);
  bool handle_auth(const wire::Request& request);
  void flush();

  boost::asio::ip::tcp::socket socket_;
  SessionId id_;
  ServerShared& shared_;
  std::vector<std::uint8_t> input_;
  std::optional<wire::Dialect> dialect_;
  std::string output_;   ///< replies not yet handed to the socket
  std::string writing_;  ///< the write in flight
  bool write_in_flight_ = false;
  bool read_paused_ = false;  ///< a client that does not read its replies stops being read
  bool closed_ = false;
  Auth auth_;
  std::string server_nonce_;
};

}  // namespace ddprun::rendezvous

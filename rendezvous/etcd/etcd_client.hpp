#pragma once
/// EtcdCluster and EtcdConnection: HTTP/1.1 (optionally TLS) to etcd's v3 JSON gateway with Boost
/// Beast, as coroutines on the caller's io_context; nothing blocks the loop (names are resolved by
/// Asio's resolver thread, every read and write has a deadline on the same loop).
///
/// Failover: a connection talks to one member at a time. When that member refuses the connection,
/// breaks it, does not answer within kMemberAnswer, or says it cannot serve now (no leader, leader
/// changed, request timed out: etcd_json.hpp's classify), the connection moves to the next member
/// and sends the request again, until the operation's own deadline. The cluster remembers the
/// member that answered last, so the agent's other connections start there. A request may thus be
/// sent twice; the store sends only requests that are safe to repeat (reads, puts of the same value,
/// transactions guarded by a compare; see etcd_store.hpp for the one exception).
///
/// A member that can never serve this client (its TLS refused us or did not verify, it speaks the
/// other protocol, it is not etcd: an HTTP server that answers otherwise, a server that answers with
/// bytes that are not HTTP, or one that closes every request's connection without a byte, as a
/// TCPStore does: etcd_peer.hpp) is left like one that failed: one member's expired certificate
/// does not end a job the others serve. Only when every member failed so is that error thrown, at
/// once (EtcdAuthError for TLS, StoreError for the others), not after the deadline.
///
/// Errors: EtcdUnreachable ("no etcd member answered within 10 s: h1:2379 (connection refused),
/// h2:2379 (no answer within 3 s)"), EtcdAuthError (credentials missing or wrong, TLS refused or
/// not verified), StoreError for a request etcd refused, StoreTimeout for a stream's deadline.
///
/// One operation at a time per connection; use it from the loop's thread only. The connection may
/// be destroyed while an operation pends: it is cancelled and ends with StoreError "interrupted".
#include "rendezvous/store.hpp"  // first: <utility> before Asio (Boost 1.74)

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "rendezvous/etcd/etcd_options.hpp"
#include "rendezvous/store_error.hpp"

namespace boost::asio::ssl {
class context;
}

namespace ddprun::rendezvous {

/// No member of the cluster could be reached within the operation's deadline.
struct EtcdUnreachable : StoreError {
  using StoreError::StoreError;
};
/// etcd refused the credentials (user/password, client certificate) or asked for some.
struct EtcdAuthError : StoreError {
  using StoreError::StoreError;
};

/// What an agent's connections to one etcd cluster share: the options, the TLS context, the
/// member to try first, the auth token. Use from one thread (the loop's).
class EtcdCluster {
 public:
  /// Throws Error when a TLS file cannot be read.
  explicit EtcdCluster(EtcdOptions options);
  ~EtcdCluster();
  const EtcdOptions& options() const { return options_; }
  /// The member to try first.
  std::size_t preferred() const { return preferred_; }
  /// `member` failed: the next one is tried first from now on (unless another took over already).
  void move_on(std::size_t member);
  /// `member` answered.
  void answered(std::size_t member) { preferred_ = member; }
  boost::asio::ssl::context* tls() { return tls_.get(); }
  /// The etcd auth token (user authentication), once one was obtained.
  std::optional<std::string> token;

 private:
  EtcdOptions options_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  std::size_t preferred_ = 0;
};

class EtcdConnection {
 public:
  /// The longest one member may take to accept a connection or answer a request before the next one
  /// is tried (an election takes about a second; a member that is gone answers in no time or never).
  static constexpr std::chrono::milliseconds kMemberAnswer{std::chrono::seconds(3)};

  EtcdConnection(boost::asio::any_io_executor executor, std::shared_ptr<EtcdCluster> cluster);
  ~EtcdConnection();
  EtcdConnection(const EtcdConnection&) = delete;
  EtcdConnection& operator=(const EtcdConnection&) = delete;

  /// POSTs `body` to `path` ("/v3/kv/range") and returns the body of etcd's 200 reply, failing
  /// over between members until `timeout` has passed (then EtcdUnreachable).
  Task<std::string> call(std::string path, std::string body, std::chrono::milliseconds timeout);

  /// A streamed POST (a watch): `body()` is sent (again after a failover: it may change, e.g. the
  /// watch's start revision), and `on_line` gets each newline-ended message of the reply until it
  /// returns true. StoreTimeout when `timeout` passes first. Failover as call(), except that the
  /// stream may stay silent as long as it likes.
  Task<void> stream(std::string path, std::function<std::string()> body,
                    std::function<bool(const std::string&)> on_line, std::chrono::milliseconds timeout);

  /// Ends the pending operation with StoreError "interrupted"; later calls fail the same way.
  void cancel();
  /// "h1:2379,h2:2379" for messages.
  std::string address() const;

  class Session;  ///< the socket and the pending operation (internal)

 private:
  std::shared_ptr<Session> session_;
};

}  // namespace ddprun::rendezvous

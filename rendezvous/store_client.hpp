#pragma once
/// StoreClient: the blocking TCPStore client of ddprun's agents and workers (the current dialect;
/// PyTorch 1.13's legacy dialect as a fallback that workers ask for, see legacy_fallback).
///
/// Every operation has a deadline: the client drives its own io_context with run_until(deadline),
/// so a dead or silent store ends in a StoreTimeout or StoreError, never a hang.
///
/// Keys: like PyTorch's TCPStore client, every user key is sent as "/" + key, so that a Python
/// client's set("foo") and this client's get("foo") meet (the server holds "/foo").
///
/// Connection policy: after a timeout or an I/O error in the middle of a request or reply, the
/// connection's state is unknown (a late reply could be taken for the next request's), so the client
/// closes it and throws; the next call reconnects (with the constructor's retry, handshake and
/// authentication). A failed request is never replayed: ADD or QUEUE_POP may or may not have happened.
/// Two timeouts keep the connection: wait() (and get()/queue_pop(), which wait first) cancels its
/// WAIT with CANCEL_WAIT and throws StoreTimeout with the connection still in step; and a request
/// rejected before sending (a key over the limits) throws StoreError without touching the connection.
///
/// Thread safety: calls are serialized by a mutex, so one client can be shared; but a blocked wait()
/// holds it, so threads that wait should each have their own client.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/store_error.hpp"
#include "rendezvous/wire.hpp"

namespace ddprun::rendezvous {

struct StoreClientOptions {
  std::string host;  ///< a name, an IPv4 or an IPv6 address ("::1", without brackets)
  int port = 0;
  /// Total time to keep retrying the connection (refused, unreachable, name not resolvable yet,
  /// closed before answering PING): the store may start after its clients. Authentication failures
  /// are not retried.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  /// The default per-operation timeout (and the WAIT timeout of get() and wait()).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  /// Authenticate with this token (see auth.hpp) when set.
  std::optional<std::string> token;
  /// Bounds on what a reply may make this client allocate, and on what it sends.
  wire::Limits limits;
  /// When set, the constructor does not connect: the first call (or connect()) does, with the same
  /// retry. An owner that may have to interrupt() a long connect registers the client first.
  bool defer_connect = false;
  /// PyTorch 1.13's TCPStore (Debian's torchrun) knows no VALIDATE: it reads one as a SET with an
  /// impossible key length and resets the connection. When set (and no token is), a connection
  /// closed in the VALIDATE/PING handshake is tried again at once in the legacy dialect (1.13's
  /// codes, a GETNUMKEYS as the probe); when the store answers that, the client keeps the legacy
  /// dialect for the rest of its life. There: no PING (ping() throws StoreError), no queues, no
  /// authentication; a timed-out wait() closes the connection instead of CANCEL_WAIT (1.13 has
  /// none; the next call reconnects); multi_get() and multi_set() are done key by key. For worker
  /// programs that may run under any launcher; ddprun's own agents speak the current dialect only.
  bool legacy_fallback = false;
};

class StoreClient {
 public:
  /// Connects, retrying with exponential backoff (10 ms doubling up to 1 s, +-25% jitter) until
  /// connect_timeout; then sends VALIDATE, PING (checks the nonce comes back; see legacy_fallback for
  /// a store that resets the connection there) and, when a token is set, authenticates. Throws StoreError("cannot reach the store at H:P within Ns: <last error>"),
  /// or a StoreError saying the store rejected the token or could not prove it knows it.
  explicit StoreClient(StoreClientOptions options);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  /// Connects now when not connected (see defer_connect); throws as the constructor does.
  void connect();
  StoreClient& operator=(const StoreClient&) = delete;

  void set(std::string_view key, std::string_view value);
  /// PyTorch's semantics: WAIT for the key (the default timeout), then GET.
  std::string get(std::string_view key);
  std::string get(std::string_view key, std::chrono::milliseconds timeout);
  /// Adds `delta` to the counter (ASCII decimal; missing = 0) and returns the new value.
  std::int64_t add(std::string_view key, std::int64_t delta);
  /// Sets `desired` when the key holds `expected` (or is missing and `expected` is empty); returns
  /// the value the key holds afterwards (or `expected` when missing and `expected` is non-empty).
  std::string compare_set(std::string_view key, std::string_view expected, std::string_view desired);
  /// True when every key exists now.
  bool check(const std::vector<std::string>& keys);
  /// Returns once every key exists; StoreTimeout after `timeout` (the connection stays usable).
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  std::int64_t num_keys();
  /// True when the key existed.
  bool delete_key(std::string_view key);
  /// Appends to the value, creating the key when missing.
  void append(std::string_view key, std::string_view value);
  /// The values of all keys, in order; as PyTorch, it WAITs for them first (the default timeout).
  std::vector<std::string> multi_get(const std::vector<std::string>& keys);
  /// Throws std::invalid_argument when the sizes differ.
  void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values);
  void queue_push(std::string_view key, std::string_view value);
  /// Blocks until the queue has an item (WAIT on the queue's key, then QUEUE_POP, again when another
  /// client took the item first) and returns it; StoreTimeout after `timeout`.
  std::string queue_pop(std::string_view key, std::chrono::milliseconds timeout);
  std::int64_t queue_len(std::string_view key);
  /// Round trip with a fresh nonce; throws when the store does not answer with it.
  void ping();
  /// The dialect this client speaks with its store: current, or legacy after a fallback.
  wire::Dialect dialect() const;

  /// Thread-safe, from any thread: the call blocked in another thread (a long WAIT, a connect
  /// retry) ends now with StoreError "interrupted", and so does every later call. For an owner
  /// that stops while its client waits.
  void interrupt();

  /// "host:port" ("[::1]:port" for an IPv6 address), as errors name it.
  std::string address() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddprun::rendezvous

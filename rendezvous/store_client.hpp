#pragma once
/// StoreClient: the blocking TCPStore client of ddprun's agents and workers (the current dialect;
/// PyTorch 1.13's legacy dialect as a fallback that workers ask for, see legacy_fallback).
///
/// A thin wrapper: the AsyncStoreClient (async_store_client.hpp) on an io_context of its own, which
/// each call runs until its coroutine completes. So the protocol, deadlines (a dead or silent store
/// ends in a StoreTimeout or StoreError, never a hang) and messages are that client's.
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

#include "rendezvous/store_client_options.hpp"
#include "rendezvous/store_error.hpp"
#include "rendezvous/wire.hpp"

namespace ddprun::rendezvous {

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

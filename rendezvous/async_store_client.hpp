#pragma once
/// AsyncStoreClient: the TCPStore client as coroutines on the caller's io_context (the current
/// dialect; PyTorch 1.13's legacy dialect as a fallback, see StoreClientOptions::legacy_fallback).
/// The blocking StoreClient that workers use runs this same code on an io_context of its own.
///
/// Deadlines: every operation has one (the options' timeout, or the wait's). A steady_timer on the
/// same io_context watches it (a deadline actor, as in Asio's timeouts example): when it passes, the
/// socket's pending operation is cancelled, so a dead or silent store ends in StoreTimeout or
/// StoreError, never a hang, and nothing blocks the loop meanwhile.
///
/// Keys: like PyTorch's TCPStore client, every user key is sent as "/" + key, so that a Python
/// client's set("foo") and this client's get("foo") meet (the server holds "/foo").
///
/// Connection policy: the first call connects (connect() may be called first), with retry,
/// handshake and authentication. After a timeout or an I/O error in the middle of a request or
/// reply, the connection's state is unknown (a late reply could be taken for the next request's),
/// so the client closes it and throws; the next call reconnects. A failed request is never
/// replayed: ADD or QUEUE_POP may or may not have happened. Two timeouts keep the connection:
/// wait() (and get()/multi_get()/queue_pop(), which wait first) cancels its WAIT with CANCEL_WAIT and
/// throws StoreTimeout with the connection still in step; and a request rejected before sending (a
/// key over the limits) throws StoreError without touching the connection.
///
/// One operation at a time: a client has one connection, and replies come in request order. Start
/// the next call after the previous one has finished; a call started while another is pending throws
/// std::logic_error (an owner with concurrent needs, e.g. a long WAIT beside heartbeats, uses one
/// client for each).
///
/// Threads and lifetime: use a client from its io_context's thread only (calls, cancel(), the
/// destructor). Each pending operation holds the client's state (shared), so the client may be
/// destroyed while one is pending: the destructor cancels it, and it ends with StoreError
/// "interrupted" when the loop next runs it, touching only that state.
#include "rendezvous/store.hpp"  // first: it includes <utility> before Asio (Boost 1.74)

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/store_client_options.hpp"
#include "rendezvous/wire.hpp"

namespace ddprun::rendezvous {

class AsyncStoreClient final : public Store {
 public:
  /// Who runs the io_context; decides two things a shared loop and a private one want differently.
  enum class Loop {
    /// A loop shared with other work (the agent's). A host name (an address literal needs no lookup)
    /// is resolved by Asio's resolver, whose getaddrinfo runs on a thread of Asio's (started at the
    /// first name, kept for the io_context's life), so the loop never blocks on DNS. An idle client
    /// leaves no work on the loop: its deadline timer is cancelled when an operation ends, so
    /// io_context::run() returns once the rest of the work is done.
    shared,
    /// A loop of the caller's own, run only while the caller blocks on one call (the blocking
    /// StoreClient). Names are resolved by getaddrinfo in the calling thread, bounded by the
    /// resolver's own timeouts (no thread is started); the deadline timer stays armed between calls,
    /// so that a call costs no timer system calls.
    private_blocking,
  };

  /// Does not connect: the first call (or connect()) does. `executor` is the io_context's.
  AsyncStoreClient(boost::asio::any_io_executor executor, StoreClientOptions options, Loop loop = Loop::shared);
  /// Cancels a pending operation (see cancel()) and closes the connection.
  ~AsyncStoreClient() override;
  AsyncStoreClient(const AsyncStoreClient&) = delete;
  AsyncStoreClient& operator=(const AsyncStoreClient&) = delete;

  /// Connects when not connected: retrying with exponential backoff (10 ms doubling up to 1 s,
  /// +-25% jitter) until connect_timeout; then VALIDATE, PING (checks the nonce comes back; see
  /// legacy_fallback for a store that resets the connection there) and, when a token is set,
  /// authentication. Throws StoreError("cannot reach the store at H:P within Ns: <last error>"), or
  /// a StoreError saying the store rejected the token or could not prove it knows it.
  Task<void> connect() override;

  // Store (see store.hpp). get(), wait() and multi_get() WAIT up to `timeout` (StoreTimeout
  // "... timed out after <timeout>[ waiting for the key(s) to be set]", the connection kept), then
  // read with the options' timeout.
  Task<void> set(std::string key, std::string value) override;
  Task<std::string> get(std::string key, std::chrono::milliseconds timeout) override;
  Task<std::int64_t> add(std::string key, std::int64_t delta) override;
  Task<std::string> compare_set(std::string key, std::string expected, std::string desired) override;
  Task<bool> check(std::vector<std::string> keys) override;
  Task<void> wait(std::vector<std::string> keys, std::chrono::milliseconds timeout) override;
  Task<std::vector<std::string>> multi_get(std::vector<std::string> keys, std::chrono::milliseconds timeout) override;

  Task<std::int64_t> num_keys();
  /// True when the key existed.
  Task<bool> delete_key(std::string key);
  /// Appends to the value, creating the key when missing.
  Task<void> append(std::string key, std::string value);
  /// Throws std::invalid_argument (before any I/O) when the sizes differ.
  Task<void> multi_set(std::vector<std::string> keys, std::vector<std::string> values);
  Task<void> queue_push(std::string key, std::string value);
  /// Waits until the queue has an item (WAIT on the queue's key, then QUEUE_POP, again when another
  /// client took the item first) and returns it; StoreTimeout after `timeout`.
  Task<std::string> queue_pop(std::string key, std::chrono::milliseconds timeout);
  Task<std::int64_t> queue_len(std::string key);
  /// Round trip with a fresh nonce; throws when the store does not answer with it.
  Task<void> ping();

  /// Ends the pending operation now (a long WAIT, a connect retry, a backoff pause) with StoreError
  /// "interrupted" and closes the connection; every later call fails the same way. For an owner that
  /// is going away. The loop's thread only (the blocking StoreClient posts it there).
  void cancel() override;

  /// The dialect spoken with the store: current, or legacy after a fallback.
  wire::Dialect dialect() const;
  /// "host:port" ("[::1]:port" for an IPv6 address), as errors name it.
  std::string address() const override;
  const StoreClientOptions& options() const;

  class Session;  ///< the shared state of the client and its pending operation (internal)

 private:
  std::shared_ptr<Session> session_;
};

}  // namespace ddprun::rendezvous

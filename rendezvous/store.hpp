#pragma once
/// Store: the key-value operations the rendezvous rounds need, asynchronous on the caller's
/// io_context (C++20 coroutines: each call is a Task to co_await). Three implementations:
/// AsyncStoreClient (a TCPStore connection), EtcdStore (etcd's v3 API, etcd_store.hpp) and
/// InProcessStore (a KeySpace in this process, for tests and table-driven checks of the round
/// protocol).
///
/// Semantics are PyTorch's TCPStore's; errors are StoreError, and StoreTimeout when a wait runs
/// out (the store stays usable after a StoreTimeout). Arguments are taken by value: a coroutine
/// may outlive the caller's temporaries.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::rendezvous {

/// A coroutine's result on an Asio executor.
template <class T>
using Task = boost::asio::awaitable<T>;

class Store {
 public:
  virtual ~Store() = default;

  virtual Task<void> set(std::string key, std::string value) = 0;
  /// WAITs for the key up to `timeout` (StoreTimeout), then GETs it.
  virtual Task<std::string> get(std::string key, std::chrono::milliseconds timeout) = 0;
  /// Adds `delta` to the counter (ASCII decimal; missing = 0) and returns the new value.
  virtual Task<std::int64_t> add(std::string key, std::int64_t delta) = 0;
  /// Sets `desired` when the key holds `expected` (or is missing and `expected` is empty); returns
  /// the value the key holds afterwards (or `expected` when missing and `expected` is non-empty).
  virtual Task<std::string> compare_set(std::string key, std::string expected, std::string desired) = 0;
  /// True when every key exists now.
  virtual Task<bool> check(std::vector<std::string> keys) = 0;
  /// Returns once every key exists; StoreTimeout after `timeout`.
  virtual Task<void> wait(std::vector<std::string> keys, std::chrono::milliseconds timeout) = 0;
  /// The values of all keys, in order, once they all exist (StoreTimeout after `timeout`).
  virtual Task<std::vector<std::string>> multi_get(std::vector<std::string> keys,
                                                   std::chrono::milliseconds timeout) = 0;

  /// The values of those of `keys` that exist now (nullopt for the others), without waiting. This
  /// default asks check() and then multi_get() (or get() key by key when some are missing); a store
  /// with a cheaper way (one etcd transaction) overrides it.
  virtual Task<std::vector<std::optional<std::string>>> get_if_present(std::vector<std::string> keys);

  /// Makes sure the store can be reached (and, for a connection, that it is open), so that a
  /// caller can tell "cannot reach the store" from a failed operation. No-op by default.
  virtual Task<void> connect();
  /// Ends the pending operation now (StoreError "interrupted"); every later call fails the same
  /// way. For an owner that is going away. No-op by default (nothing ever pends for long).
  virtual void cancel() {}

  /// "host:port" for messages ("in-process" for InProcessStore).
  virtual std::string address() const = 0;
};

}  // namespace ddprun::rendezvous

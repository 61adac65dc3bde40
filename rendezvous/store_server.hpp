#pragma once
/// StoreServer: a TCPStore server (both dialects, one key space) on its own thread and io_context,
/// so that a flood of store clients never delays the agent's own event loop.
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/wire.hpp"

namespace ddprun::rendezvous {

struct StoreServerOptions {
  std::string host = "0.0.0.0";  ///< the address to bind; "::" for all IPv6 (and v4-mapped)
  int port = 0;                  ///< 0 = a free port chosen by the kernel
  wire::Limits limits;
  std::size_t max_connections = 100000;  ///< further connections are accepted and closed at once
  std::optional<std::string> token;      ///< when set, clients must authenticate first
  /// Keys set before the first client is served (until clear()), named as clients name them (the
  /// server holds "/" + key, as PyTorch's clients prefix it): facts a client must never miss.
  std::map<std::string, std::string> initial_keys;
};

class StoreServer {
 public:
  /// Binds and listens now (throws StoreError naming host:port when it cannot); serves from start().
  explicit StoreServer(StoreServerOptions options);
  /// Serves on a socket that the caller already bound and made listen (the agent's held port);
  /// takes ownership of `listening_fd`.
  StoreServer(StoreServerOptions options, int listening_fd);
  ~StoreServer();  ///< stop()
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const;

  /// Starts the server's thread.
  void start();

  /// Stops accepting, closes every connection (clients blocked in WAIT see the connection end at
  /// once, not a hang), and joins the thread. Idempotent.
  void stop();

  /// Drops every key, queue and connection: the next attempt's workers start from an empty store.
  /// Blocks until done.
  void clear();

  /// Drops every key and queue whose name (as clients name it, without PyTorch's leading "/") does
  /// not start with `kept`; connections stay. Blocks until done (a hop to the server's thread);
  /// returns how many went.
  std::size_t erase_all_but(const std::string& kept);

  /// Blocks until no client is connected, or for `timeout`; returns whether none is. For a host
  /// that should not leave while its clients still read the last thing it told them.
  bool wait_until_idle(std::chrono::milliseconds timeout);

  /// Live connections and keys, for tests and diagnostics (blocks on the server thread).
  std::size_t connection_count() const;
  std::size_t key_count() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddprun::rendezvous

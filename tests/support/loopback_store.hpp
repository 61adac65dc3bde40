#pragma once
/// A StoreServer of the test's own on 127.0.0.1, at a port the kernel picks, already serving.
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/store_server.hpp"

namespace ddprun::testing {

/// Started; stopped when destroyed. `token`: the store wants it from every client.
inline std::unique_ptr<rendezvous::StoreServer> start_loopback_store(std::optional<std::string> token = std::nullopt) {
  rendezvous::StoreServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.token = std::move(token);
  auto server = std::make_unique<rendezvous::StoreServer>(options);
  server->start();
  return server;
}

}  // namespace ddprun::testing

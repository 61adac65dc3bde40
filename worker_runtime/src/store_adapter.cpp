#include "store_adapter.hpp"

#include <arpa/inet.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>

#include "ddprun/error.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/store_error.hpp"

namespace ddprun::detail {
namespace {

/// The server this process hosts, per port: a second group on the same job must reuse it (the port
/// is taken), and it must live while any group may still need it.
std::shared_ptr<rendezvous::StoreServer> host_store(const std::string& master_addr, int port,
                                                    const std::optional<std::string>& token) {
  static std::mutex mutex;
  static std::map<int, std::weak_ptr<rendezvous::StoreServer>> servers;
  std::lock_guard lock(mutex);
  if (auto server = servers[port].lock()) return server;
  rendezvous::StoreServerOptions options;
  // As PyTorch's TCPStore: reachable on every interface of the master. An IPv6 MASTER_ADDR needs an
  // IPv6 socket (the server accepts v4-mapped peers on it too); "0.0.0.0" works where IPv6 is off.
  in6_addr v6{};
  options.host = inet_pton(AF_INET6, master_addr.c_str(), &v6) == 1 ? "::" : "0.0.0.0";
  options.port = port;
  options.token = token;
  std::shared_ptr<rendezvous::StoreServer> server;
  try {
    server = std::make_shared<rendezvous::StoreServer>(options);
  } catch (const rendezvous::StoreError& error) {
    throw Error("rank 0 hosts the job's store (the launcher has no agent store) but cannot listen on port " +
                std::to_string(port) + ": " + error.what() + "; choose a free MASTER_PORT");
  }
  server->start();
  servers[port] = server;
  return server;
}

int next_group_number() {
  static std::atomic<int> groups{0};
  return groups.fetch_add(1);
}

}  // namespace

GroupStore connect_group_store(const Identity& identity, std::chrono::milliseconds timeout) {
  GroupStore store;
  std::optional<std::string> token;
  try {
    token = rendezvous::auth::token_from_environment(rendezvous::auth::process_getenv);
  } catch (const rendezvous::StoreError& error) {
    throw Error(error.what());
  }
  if (!identity.agent_store && identity.rank == 0)
    store.hosted = host_store(identity.master_addr, identity.master_port, token);

  rendezvous::StoreClientOptions options;
  options.host = identity.master_addr;
  options.port = identity.master_port;
  options.connect_timeout = timeout;
  options.timeout = timeout;
  options.token = token;
  // Under torchrun 1.13 (Debian's) the store is PyTorch 1.13's TCPStore, which knows no VALIDATE: the
  // client then speaks its dialect. ddprun's stores and PyTorch 2.x's answer the current one.
  options.legacy_fallback = true;
  try {
    store.client = std::make_unique<rendezvous::StoreClient>(options);
  } catch (const rendezvous::StoreError& error) {
    const std::string hint = identity.agent_store ? " (the launcher's agent serves it)" : " (rank 0 hosts it)";
    throw Error("rank " + std::to_string(identity.rank) + " cannot connect to the job's store at " +
                identity.master_addr + ":" + std::to_string(identity.master_port) + hint + ": " + error.what());
  }
  const std::string group = "ddprun/pg/" + std::to_string(identity.restart_count) + "/" + std::to_string(next_group_number()) + "/";
  // The launcher's agent store outlives attempts (torchrun's, and ddprun's static multi-node one):
  // the attempt's keys go where PyTorch's env:// puts them, under PrefixStore("/worker/attempt_<n>"),
  // so that one cleanup covers both and a restarted attempt never meets the previous one's keys.
  store.prefix = identity.agent_store ? "/worker/attempt_" + std::to_string(identity.restart_count) + "/" + group : group;
  return store;
}

}  // namespace ddprun::detail

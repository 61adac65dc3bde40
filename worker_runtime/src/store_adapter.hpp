#pragma once
/// The job's store as one process group sees it: a connected client, the key prefix that is the
/// group's alone, and the store server itself when this process hosts it (rank 0 without an agent
/// store). Backend-neutral: the gloo and nccl backends both rendezvous through it.
#include <chrono>
#include <memory>
#include <string>

#include "ddprun/identity.hpp"
#include "rendezvous/store_client.hpp"
#include "rendezvous/store_server.hpp"

namespace ddprun::detail {

struct GroupStore {
  /// Set on the hosting rank; shared by every group of this process that uses the same port, and kept
  /// alive as long as any of them.
  std::shared_ptr<rendezvous::StoreServer> hosted;
  std::unique_ptr<rendezvous::StoreClient> client;
  /// "ddprun/pg/<restart_count>/<n>/", after "/worker/attempt_<restart_count>/" (PyTorch's attempt
  /// prefix) when the agent serves the store: n counts the groups this process created, so every rank must
  /// create its groups in the same order (as with torch.distributed); the restart count keeps a
  /// restarted attempt off the previous attempt's keys even when the agent's store outlives it.
  std::string prefix;
};

/// Connects to the store at MASTER_ADDR:MASTER_PORT (hosting it there first when
/// `!identity.agent_store && identity.rank == 0`), with `timeout` for the connection and for each
/// store operation. The token of DDPRUN_STORE_TOKEN / DDPRUN_STORE_TOKEN_FILE is used when set.
/// Throws ddprun::Error naming the address.
GroupStore connect_group_store(const Identity& identity, std::chrono::milliseconds timeout);

}  // namespace ddprun::detail

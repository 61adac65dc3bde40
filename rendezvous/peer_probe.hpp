#pragma once
/// Peer probes: is the agent at host:port still there? A TCP connect to the port the agent holds
/// open answers in one round trip: accepted (alive), refused (its process is gone: the kernel closed
/// the port), or silent until the timeout (its machine or link is gone). Used when a worker fails,
/// to tell "a peer died and took its workers with it" (a membership change) from "a worker failed"
/// (a restart) without waiting for heartbeats to run out.
#include <chrono>
#include <string>
#include <vector>

#include "rendezvous/endpoint.hpp"

namespace ddprun::rendezvous {

/// Probes every endpoint at once; returns the indexes of those that refused or did not answer
/// within `timeout`, in order.
std::vector<std::size_t> unreachable_peers(const std::vector<Endpoint>& peers, std::chrono::milliseconds timeout);

}  // namespace ddprun::rendezvous

#pragma once
/// Peer probes: is the agent at host:port still there? A TCP connect to the port the agent holds
/// open answers in one round trip: accepted (alive), refused (its process is gone: the kernel closed
/// the port), or silent until the timeout (its machine or link is gone). Used when a worker fails,
/// to tell "a peer died and took its workers with it" (a membership change) from "a worker failed"
/// (a restart) without waiting for heartbeats to run out.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <vector>

#include "rendezvous/endpoint.hpp"
#include "rendezvous/store.hpp"

namespace ddprun::rendezvous {

/// Probes every endpoint at once, on `executor`; completes with the indexes of those that refused
/// or did not answer within `timeout`, in order. Never blocks the loop; the connects still pending
/// at the timeout are closed and end on their own (they touch only state they share).
Task<std::vector<std::size_t>> unreachable_peers(boost::asio::any_io_executor executor, std::vector<Endpoint> peers,
                                                 std::chrono::milliseconds timeout);

}  // namespace ddprun::rendezvous

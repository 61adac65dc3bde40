#pragma once
/// What a gloo failure becomes: a ddprun error that names the operation, this rank, and the peer
/// when the failure can be pinned on one.
#include <chrono>
#include <exception>
#include <string>

#include "gloo_peers.hpp"

namespace ddprun::detail {

struct FailureContext {
  std::string operation;  ///< "all_reduce #3 (float32 x 1024, sum)"
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  const PeerDirectory* peers = nullptr;
};

/// The ddprun exception for `error` (a gloo exception, or any other): TimeoutError when gloo timed
/// out waiting for a peer, ddprun::Error otherwise, e.g. "all_reduce #3 (float32 x 1024, sum) failed
/// on rank 0 of 2: the connection to rank 1 (127.0.0.1:41234) broke (the peer died, or gave up
/// after a failure of its own) (gloo: <gloo's message>)".
std::exception_ptr translate_gloo_failure(const FailureContext& context, const std::exception& error);

}  // namespace ddprun::detail

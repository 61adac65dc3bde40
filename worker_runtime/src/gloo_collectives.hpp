#pragma once
/// The collectives on a connected gloo context (two ranks or more), run on the calling thread.
/// Each takes the operation's tag (unique among operations that could be in flight at once: the
/// group's sequence number) and the timeout that bounds every step.
#include <chrono>
#include <cstdint>
#include <memory>

#include "ddprun/types.hpp"

namespace gloo {
class Context;
}

namespace ddprun::detail {

struct GlooCall {
  std::shared_ptr<gloo::Context> context;
  std::uint32_t tag = 0;
  std::chrono::milliseconds timeout{0};
};

/// In place. Small buffers: a direct exchange (all_reduce_by_exchange); others: gloo's ring
/// allreduce (the algorithm PyTorch's gloo group uses), with no copy of the buffer. avg divides
/// afterwards.
void gloo_all_reduce(const GlooCall& call, Buffer buffer, ReduceOp op);
/// gloo's binomial-tree broadcast, in place.
void gloo_broadcast(const GlooCall& call, Buffer buffer, int root);
/// gloo's ring allgather; in place when `input` is this rank's block of `output`.
void gloo_all_gather(const GlooCall& call, Buffer input, Buffer output);
/// reduce_scatter_by_ring, then avg's division.
void gloo_reduce_scatter(const GlooCall& call, Buffer input, Buffer output, ReduceOp op);
void gloo_barrier(const GlooCall& call);

}  // namespace ddprun::detail

#pragma once
/// Collectives that this gloo lacks, or runs slowly for small buffers, written on its point-to-point
/// unbound buffers. Like gloo's, they run on the calling thread, bound every wait by call.timeout,
/// need two ranks or more, and leave avg's division to the caller.
#include "ddprun/types.hpp"
#include "gloo_collectives.hpp"

namespace ddprun::detail {

/// Every rank sends its whole buffer to every other and reduces all of them in rank order: one
/// message delay, for buffers small enough that (size-1) copies cost less than the ring's steps.
void all_reduce_by_exchange(const GlooCall& call, Buffer buffer, ReduceOp op);

/// A ring reduce-scatter (this gloo has no new-style one): size-1 steps, each sending one block to
/// the next rank while receiving one from the previous, then reducing it with the local block.
/// `output` may alias any part of `input`.
void reduce_scatter_by_ring(const GlooCall& call, Buffer input, Buffer output, ReduceOp op);

}  // namespace ddprun::detail

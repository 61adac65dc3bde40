#pragma once
/// Broadcasting a list of tensors from one rank, coalesced: one collective per (dtype, device)
/// instead of one per tensor, since models have many small tensors (biases, BatchNorm statistics).
#include <vector>

#include <ATen/Tensor.h>

#include "ddprun/process_group.hpp"

namespace ddprun::torch::detail {

/// Collective: every rank passes tensors of the same shapes, dtypes and order; afterwards each holds
/// `root`'s values. Writes in place without recording autograd history (parameters included).
void broadcast_tensors(ProcessGroup& group, const std::vector<at::Tensor>& tensors, int root);

}  // namespace ddprun::torch::detail

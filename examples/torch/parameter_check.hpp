#pragma once
/// Whether every rank holds the same parameters, bit for bit: the invariant of data-parallel training
/// that demo_basic and demo_checkpoint check at their end.
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "ddprun/process_group.hpp"
#include "ddprun/torch/tensor_buffer.hpp"

namespace examples {

/// All of `module`'s parameters, flattened into one new tensor (on their device).
inline torch::Tensor flat_parameters(const torch::nn::Module& module) {
  std::vector<torch::Tensor> pieces;
  for (const auto& parameter : module.parameters()) pieces.push_back(parameter.detach().flatten());
  return torch::cat(pieces).contiguous();
}

/// Collective: the largest absolute difference between this rank's parameters and rank 0's, over
/// all ranks (the same value on every rank; 0 when they are identical).
inline double max_parameter_difference(const torch::nn::Module& module, ddprun::ProcessGroup& group) {
  const torch::Tensor mine = flat_parameters(module);
  torch::Tensor rank0 = mine.clone();
  group.broadcast(ddprun::torch::buffer_of(rank0), 0);
  torch::Tensor difference = (mine - rank0).abs().max().to(torch::kFloat64).reshape({1}).contiguous();
  group.all_reduce(ddprun::torch::buffer_of(difference), ddprun::ReduceOp::max);
  return difference.item<double>();
}

}  // namespace examples

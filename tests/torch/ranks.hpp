#pragma once
/// Test helpers for ddprun::torch (outside namespace ddprun: TORCH_MODULE names `torch::nn`, which
/// inside it would mean ddprun::torch::nn): forked ranks joined into a gloo group, the tutorial's ToyModel,
/// deterministic data, and comparisons.
#include <functional>
#include <string>

#include <torch/torch.h>

#include "ddprun/process_group.hpp"
#include "../support/free_port.hpp"

namespace ddptest {

using ddprun::testing::free_port;  // a loopback port that was free a moment ago

using RankBody = std::function<int(ddprun::ProcessGroup& group)>;
/// Forks `world` ranks that each join a gloo group (rank 0 hosts the store on a free loopback
/// port) and run `body`; returns how many ranks failed (a non-zero return, an exception, a crash,
/// or still running after 240 s). Each rank runs LibTorch with one thread. The test process itself
/// never runs LibTorch, so that forking it stays safe (OpenMP's pool does not survive a fork).
int run_ranks(int world, const RankBody& body);

/// The PyTorch DDP tutorial's model: Linear 10->10, ReLU, Linear 10->5.
struct ToyModelImpl : ::torch::nn::Module {
  ToyModelImpl();
  at::Tensor forward(const at::Tensor& x);
  ::torch::nn::Linear net1{nullptr}, net2{nullptr};
};
TORCH_MODULE(ToyModel);

/// A global batch for `step`: inputs [batch, 10] and targets [batch, 5], the same in every process.
std::pair<at::Tensor, at::Tensor> toy_batch(int step, std::int64_t batch);

/// All of a module's parameters, flattened into one float32 CPU tensor (registration order).
at::Tensor flat_parameters(::torch::nn::Module& module);

/// Prints and counts elements where |a - b| > rtol * |b| + atol.
int expect_close(const at::Tensor& actual, const at::Tensor& expected, double rtol, double atol, const std::string& what);

}  // namespace ddptest

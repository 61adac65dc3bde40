#pragma once
/// DistributedDataParallel for LibTorch modules: PyTorch's torch.nn.parallel.DistributedDataParallel
/// for C++ trainers, on a ddprun::ProcessGroup (gloo on CPU tensors, nccl on CUDA tensors).
///
///   auto group = ddprun::ProcessGroup::create(ddprun::identity_from_environment());
///   ToyModel model;                                           // a TORCH_MODULE holder
///   ddprun::torch::DistributedDataParallel ddp(model, *group); // broadcasts rank 0's weights
///   torch::optim::SGD optimizer(ddp.parameters(), 0.001);
///   optimizer.zero_grad();
///   auto loss = torch::mse_loss(ddp(inputs), labels);          // ddp(x) = ddp.forward(x)
///   loss.backward();                                           // returns with averaged gradients
///   optimizer.step();
///
/// Gradient accumulation: backward passes under `auto guard = ddp.no_sync();` keep gradients local;
/// the next backward outside it all-reduces the accumulated sum, as in PyTorch.
///
/// Devices: move the module to its device before wrapping it (module->to(device)), as in PyTorch.
/// CPU tensors need a gloo group, CUDA tensors an nccl group (ProcessGroupOptions::backend;
/// `automatic` picks nccl on a machine with a GPU); a mismatch is a ddprun::Error at construction.
///
/// Evaluation: call ddp.module()->forward(...) (no collective at all) or ddp(x) under
/// torch::NoGradGuard (no buffer broadcast then), so ranks may evaluate different numbers of batches.
///
/// Note: inside namespace ddprun, `torch::` names ddprun::torch; write `::torch::` there, and define
/// modules (TORCH_MODULE, which names `torch::nn`) outside namespace ddprun.
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "ddprun/torch/reducer.hpp"
#include "ddprun/torch/tensor_buffer.hpp"

namespace ddprun::torch {

namespace detail {
template <class M>
std::shared_ptr<::torch::nn::Module> module_pointer(const ::torch::nn::ModuleHolder<M>& holder) {
  return holder.ptr();
}
template <class M>
std::shared_ptr<::torch::nn::Module> module_pointer(const std::shared_ptr<M>& module) {
  return module;
}
}  // namespace detail

/// RAII: while it lives, backward passes of its DistributedDataParallel do not synchronize.
/// Not copyable; `auto guard = ddp.no_sync();` (guaranteed elision).
class NoSyncGuard {
 public:
  explicit NoSyncGuard(Reducer& reducer) : reducer_(reducer), previous_(reducer.require_gradient_sync()) {
    reducer_.set_require_gradient_sync(false);
  }
  ~NoSyncGuard() { reducer_.set_require_gradient_sync(previous_); }
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  Reducer& reducer_;
  bool previous_;
};

/// `ModuleT` is what the caller holds: a ModuleHolder (TORCH_MODULE(Net) -> Net) or a
/// std::shared_ptr to a module with a forward(); class template argument deduction picks it.
template <class ModuleT>
class DistributedDataParallel {
 public:
  /// Collective: every rank constructs it with the same module structure, in the same order as its
  /// other collectives. Parameters and buffers are broadcast from rank 0. `group` must outlive this.
  DistributedDataParallel(ModuleT module, ProcessGroup& group, DdpOptions options = {})
      : module_(std::move(module)), reducer_(detail::module_pointer(module_), group, options) {}

  /// Broadcasts buffers when due (see DdpOptions::broadcast_buffers), then the module's forward.
  template <class... Args>
  decltype(auto) forward(Args&&... args) {
    reducer_.prepare_forward();
    return module_->forward(std::forward<Args>(args)...);
  }
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    return forward(std::forward<Args>(args)...);
  }

  /// The wrapped module (PyTorch's ddp.module): for evaluation without collectives and checkpoints.
  ModuleT& module() { return module_; }
  const ModuleT& module() const { return module_; }
  /// For the optimizer: the module's parameters.
  std::vector<::at::Tensor> parameters(bool recurse = true) const { return module_->parameters(recurse); }

  /// See NoSyncGuard.
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(reducer_); }

  /// Normally automatic at the end of backward (see Reducer); idempotent.
  void finish_gradient_synchronization() { reducer_.finish_gradient_synchronization(); }

  DdpStats stats() const { return reducer_.stats(); }
  Reducer& reducer() { return reducer_; }
  ProcessGroup& group() const { return reducer_.group(); }

 private:
  ModuleT module_;
  Reducer reducer_;
};

}  // namespace ddprun::torch

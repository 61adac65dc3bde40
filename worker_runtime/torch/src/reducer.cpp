// The Reducer's construction (consistency check, initial broadcast, bucket layout, hooks) and its
// small public methods. What happens during backward is in reducer_backward.cpp.
#include "ddprun/torch/reducer.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_set>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/variable.h>

#include "broadcast_tensors.hpp"
#include "bucket_plan.hpp"
#include "ddprun/error.hpp"
#include "ddprun/torch/tensor_buffer.hpp"
#include "reducer_state.hpp"

namespace ddprun::torch {
namespace {

/// Runs after a parameter's grad accumulator, i.e. once its .grad() holds this backward's gradient.
class ReadyHook final : public ::torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::weak_ptr<Reducer::State> state, std::size_t index) : state_(std::move(state)), index_(index) {}
  ::torch::autograd::variable_list operator()(const ::torch::autograd::variable_list& outputs,
                                              const ::torch::autograd::variable_list& /*inputs*/) override {
    if (auto state = state_.lock()) state->on_gradient_ready(index_);
    return outputs;
  }

 private:
  std::weak_ptr<Reducer::State> state_;
  std::size_t index_;
};

/// Ranks wrapping different models would exchange garbage or hang; PyTorch checks shapes up front
/// too. Compares (tensor count, element count) of every rank with rank 0's.
void check_same_structure(ProcessGroup& group, const std::vector<at::Tensor>& tensors) {
  if (group.size() == 1) return;
  std::int64_t elements = 0;
  for (const auto& tensor : tensors) elements += tensor.numel();
  std::vector<std::int64_t> mine{static_cast<std::int64_t>(tensors.size()), elements};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(group.size()));
  group.all_gather(ddprun::buffer_of(mine.data(), mine.size()), ddprun::buffer_of(all.data(), all.size()));
  for (int rank = 1; rank < group.size(); ++rank) {
    if (all[2 * rank] != all[0] || all[2 * rank + 1] != all[1]) {
      throw Error("DistributedDataParallel: rank " + std::to_string(rank) + "'s module has " +
                  std::to_string(all[2 * rank]) + " parameters and buffers with " + std::to_string(all[2 * rank + 1]) +
                  " elements, rank 0's has " + std::to_string(all[0]) + " with " + std::to_string(all[1]) +
                  "; every rank must wrap the same model");
    }
  }
}

/// gloo reduces host memory, nccl device memory: a mismatch would crash inside the backend.
void check_memory_fits_backend(const ProcessGroup& group, const at::Tensor& tensor, const std::string& what) {
  const bool nccl = group.backend() == Backend::nccl;
  if (nccl != tensor.is_cuda()) {
    throw Error("DistributedDataParallel: " + what + " is on " + tensor.device().str() + " but the group's backend is " +
                std::string(name_of(group.backend())) +
                (nccl ? ", which takes CUDA memory: move the module to its CUDA device before wrapping it, or create "
                        "the group with Backend::gloo"
                      : ", which takes host memory: create the group with Backend::nccl, or keep the module on the CPU"));
  }
}

std::int64_t group_key_of(const at::Tensor& tensor) {
  return (static_cast<std::int64_t>(tensor.scalar_type()) << 32) |
         (static_cast<std::int64_t>(tensor.device().type()) << 16) | (tensor.device().index() & 0xffff);
}

}  // namespace

Reducer::Reducer(std::shared_ptr<::torch::nn::Module> module, ProcessGroup& group, DdpOptions options) {
  if (!module) throw Error("DistributedDataParallel: a null module");
  state_ = std::make_shared<State>(std::move(module), group, options);
  State& state = *state_;

  // Shared parameters appear once per owner in named_parameters(); reduce each tensor once.
  std::unordered_set<const void*> seen;
  std::vector<at::Tensor> to_broadcast;
  for (const auto& item : state.module->named_parameters(/*recurse=*/true)) {
    const at::Tensor& tensor = item.value();
    if (!seen.insert(tensor.unsafeGetTensorImpl()).second) continue;
    require_data_type(tensor.scalar_type(), "parameter " + item.key());
    check_memory_fits_backend(group, tensor, "parameter " + item.key());
    to_broadcast.push_back(tensor);
    if (tensor.requires_grad()) {
      ReducedParameter parameter;
      parameter.name = item.key();
      parameter.tensor = tensor;
      state.parameters.push_back(std::move(parameter));
    }
  }
  for (const auto& item : state.module->named_buffers(/*recurse=*/true)) {
    const at::Tensor& tensor = item.value();
    if (!tensor.defined() || !seen.insert(tensor.unsafeGetTensorImpl()).second) continue;
    require_data_type(tensor.scalar_type(), "buffer " + item.key());
    check_memory_fits_backend(group, tensor, "buffer " + item.key());
    to_broadcast.push_back(tensor);
    state.buffers.push_back(tensor);
  }
  check_same_structure(group, to_broadcast);
  detail::broadcast_tensors(group, to_broadcast, /*root=*/0);

  // Gradients arrive roughly in reverse registration order (the last layer's first).
  std::reverse(state.parameters.begin(), state.parameters.end());
  std::vector<detail::BucketCandidate> candidates;
  for (const auto& parameter : state.parameters) {
    candidates.push_back({static_cast<std::size_t>(parameter.tensor.numel()) * parameter.tensor.element_size(),
                          group_key_of(parameter.tensor)});
  }
  for (auto& members : detail::plan_buckets(candidates, options.first_bucket_cap_bytes, options.bucket_cap_bytes)) {
    GradientBucket bucket;
    std::int64_t elements = 0;
    for (std::size_t index : members) {
      state.parameters[index].bucket = state.buckets.size();
      state.parameters[index].offset = elements;
      elements += state.parameters[index].tensor.numel();
    }
    const at::Tensor& first = state.parameters[members.front()].tensor;
    bucket.flat = at::zeros({elements}, first.options().requires_grad(false));
    bucket.members = std::move(members);
    state.buckets.push_back(std::move(bucket));
  }

  for (std::size_t index = 0; index < state.parameters.size(); ++index) {
    ReducedParameter& parameter = state.parameters[index];
    if (!parameter.tensor.is_leaf()) {
      throw Error("DistributedDataParallel: parameter " + parameter.name + " is not a leaf tensor");
    }
    parameter.accumulator = ::torch::autograd::impl::grad_accumulator(parameter.tensor);
    parameter.hook_key = parameter.accumulator->add_post_hook(std::make_unique<ReadyHook>(state_, index));
  }
}

Reducer::~Reducer() {
  state_->drain();  // the group's thread may still write into the buckets
  for (auto& parameter : state_->parameters) {
    if (parameter.accumulator) parameter.accumulator->del_post_hook(parameter.hook_key);
  }
}

void Reducer::prepare_forward() {
  {
    std::lock_guard lock(state_->mutex);
    // A backward that failed midway never reached its callback: start the next one clean.
    if (state_->in_backward) {
      state_->in_backward = false;
      state_->drain();
    }
    // As PyTorch, only forwards that will be synchronized broadcast: evaluation under NoGradGuard
    // may then run a different number of batches on each rank without a mismatched collective.
    if (!state_->options.broadcast_buffers || !state_->require_sync || !at::GradMode::is_enabled() ||
        state_->buffers.empty() || state_->group.size() == 1) {
      return;
    }
  }
  detail::broadcast_tensors(state_->group, state_->buffers, /*root=*/0);
}

void Reducer::finish_gradient_synchronization() { state_->finish(); }

void Reducer::set_require_gradient_sync(bool enabled) {
  std::lock_guard lock(state_->mutex);
  state_->require_sync = enabled;
}

bool Reducer::require_gradient_sync() const {
  std::lock_guard lock(state_->mutex);
  return state_->require_sync;
}

DdpStats Reducer::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

std::vector<std::vector<std::string>> Reducer::bucket_layout() const {
  std::vector<std::vector<std::string>> layout;
  for (const auto& bucket : state_->buckets) {
    auto& names = layout.emplace_back();
    for (std::size_t index : bucket.members) names.push_back(state_->parameters[index].name);
  }
  return layout;
}

ProcessGroup& Reducer::group() const { return state_->group; }
const DdpOptions& Reducer::options() const { return state_->options; }

}  // namespace ddprun::torch

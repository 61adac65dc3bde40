#pragma once
/// The Reducer's state, shared between the Reducer, the autograd hooks and the end-of-backward
/// callback (which hold it weakly, so that a destroyed Reducer turns them into no-ops).
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/Tensor.h>
#include <torch/csrc/autograd/function.h>

#include "ddprun/torch/reducer.hpp"

namespace ddprun::torch {

using Clock = std::chrono::steady_clock;

struct ReducedParameter {
  std::string name;
  at::Tensor tensor;
  std::size_t bucket = 0;
  std::int64_t offset = 0;  ///< in elements, into its bucket's flat buffer
  std::shared_ptr<::torch::autograd::Node> accumulator;  ///< held: the tensor holds it only weakly
  std::uintptr_t hook_key = 0;
  bool ready = false;  ///< this backward: its gradient (or a zero) is in the bucket
};

struct GradientBucket {
  std::vector<std::size_t> members;  ///< indices into State::parameters, ascending
  at::Tensor flat;                   ///< the members' gradients back to back, reduced in place
  std::size_t pending = 0;           ///< members not ready yet in this backward
  std::shared_ptr<Work> work;        ///< the all_reduce in flight, once launched
  Clock::time_point launched{};
  Clock::time_point finished{};
  bool finish_seen = false;
};

struct Reducer::State : std::enable_shared_from_this<Reducer::State> {
  State(std::shared_ptr<::torch::nn::Module> wrapped, ProcessGroup& process_group, DdpOptions ddp_options)
      : module(std::move(wrapped)), group(process_group), options(ddp_options) {}

  std::shared_ptr<::torch::nn::Module> module;
  ProcessGroup& group;
  DdpOptions options;
  std::vector<ReducedParameter> parameters;  ///< reverse registration order: expected gradient order
  std::vector<GradientBucket> buckets;
  std::vector<at::Tensor> buffers;  ///< broadcast before forward

  mutable std::mutex mutex;  ///< hooks may run on autograd's device threads
  bool require_sync = true;
  bool in_backward = false;     ///< a synchronized backward has started and not finished
  std::size_t next_bucket = 0;  ///< buckets launch strictly in index order: the same on every rank
  DdpStats stats;

  /// The grad accumulator hook of parameters[index].
  void on_gradient_ready(std::size_t index);
  /// Waits every bucket, writes the averages into .grad(); see Reducer::finish_gradient_synchronization.
  void finish();
  /// Waits what is in flight, ignoring failures: before buffers may be reused or freed. The caller
  /// holds the mutex, or no hook can run (destruction).
  void drain() noexcept;

 private:
  void begin_backward();               // mutex held
  void launch_ready_buckets();         // mutex held
  void observe_completions(Clock::time_point now);  // mutex held
  void wait_and_copy_back(const at::Tensor& used);  // mutex held
};

}  // namespace ddprun::torch

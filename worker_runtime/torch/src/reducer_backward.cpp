// One synchronized backward: hooks fill buckets and launch their all_reduce in bucket order; the
// engine's end-of-backward callback waits them and writes the averages back into .grad().
#include <algorithm>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "ddprun/error.hpp"
#include "ddprun/torch/tensor_buffer.hpp"
#include "device_sync.hpp"
#include "reducer_state.hpp"

namespace ddprun::torch {
namespace {

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

at::Tensor slot_of(const ReducedParameter& parameter, const GradientBucket& bucket) {
  return bucket.flat.narrow(0, parameter.offset, parameter.tensor.numel()).view(parameter.tensor.sizes());
}

}  // namespace

void Reducer::State::on_gradient_ready(std::size_t index) {
  std::lock_guard lock(mutex);
  if (!require_sync) return;  // no_sync: the gradient stays in .grad(), accumulating
  if (!in_backward) begin_backward();
  ReducedParameter& parameter = parameters[index];
  if (parameter.ready) {
    throw Error("DistributedDataParallel: parameter " + parameter.name +
                " received a gradient twice in one backward; reentrant or repeated backward through the same "
                "graph is not supported while gradients are synchronized (use no_sync())");
  }
  GradientBucket& bucket = buckets[parameter.bucket];
  const at::Tensor& grad = parameter.tensor.grad();
  at::AutoGradMode no_grad(false);
  if (!grad.defined()) {
    slot_of(parameter, bucket).zero_();
  } else if (grad.is_sparse()) {
    throw Error("DistributedDataParallel: parameter " + parameter.name + " has a sparse gradient, which is not supported");
  } else {
    slot_of(parameter, bucket).copy_(grad);
  }
  parameter.ready = true;
  const auto now = Clock::now();
  observe_completions(now);
  if (--bucket.pending == 0) {
    const std::size_t before = next_bucket;
    launch_ready_buckets();
    // From a hook: autograd may still have layers to run, which this all_reduce overlaps.
    stats.buckets_launched_during_backward += static_cast<std::int64_t>(next_bucket - before);
  }
}

void Reducer::State::begin_backward() {
  in_backward = true;
  next_bucket = 0;
  for (auto& parameter : parameters) parameter.ready = false;
  for (auto& bucket : buckets) {
    bucket.pending = bucket.members.size();
    bucket.work.reset();
    bucket.finish_seen = false;
  }
  // Runs on the engine when this backward's graph is done, before backward() returns.
  std::weak_ptr<State> weak = weak_from_this();
  ::torch::autograd::Engine::get_default_engine().queue_callback([weak] {
    if (auto state = weak.lock()) state->finish();
  });
}

void Reducer::State::launch_ready_buckets() {
  while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) {
    GradientBucket& bucket = buckets[next_bucket++];
    detail::wait_for_device_writes(bucket.flat);
    bucket.launched = Clock::now();
    bucket.work = group.all_reduce_async(buffer_of(bucket.flat), ReduceOp::avg);
  }
}

void Reducer::State::observe_completions(Clock::time_point now) {
  for (std::size_t index = 0; index < next_bucket; ++index) {
    GradientBucket& bucket = buckets[index];
    if (!bucket.finish_seen && bucket.work && bucket.work->completed()) {
      bucket.finished = now;
      bucket.finish_seen = true;
    }
  }
}

void Reducer::State::finish() {
  std::lock_guard lock(mutex);
  if (!in_backward) return;
  in_backward = false;

  std::vector<std::size_t> missing;
  for (std::size_t index = 0; index < parameters.size(); ++index) {
    if (!parameters[index].ready) missing.push_back(index);
  }
  if (!missing.empty() && !options.find_unused_parameters) {
    drain();
    // Registration order reads better than the reversed bucket order.
    std::string names;
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      names += (names.empty() ? "" : ", ") + parameters[*it].name;
    }
    throw Error("DistributedDataParallel on rank " + std::to_string(group.rank()) +
                ": parameters that received no gradient in this backward: " + names +
                " — pass find_unused_parameters=true (DdpOptions) if the model leaves them unused on purpose, "
                "or make the loss depend on them");
  }

  at::AutoGradMode no_grad(false);
  at::Tensor used;  // find_unused_parameters: per parameter, whether any rank gave it a gradient
  std::shared_ptr<Work> used_work;
  if (options.find_unused_parameters) {
    used = at::ones({static_cast<std::int64_t>(parameters.size())}, at::kInt);
    std::int32_t* used_flags = used.data_ptr<std::int32_t>();
    for (std::size_t index : missing) {
      ReducedParameter& parameter = parameters[index];
      slot_of(parameter, buckets[parameter.bucket]).zero_();
      parameter.ready = true;
      --buckets[parameter.bucket].pending;
      used_flags[index] = 0;
    }
    launch_ready_buckets();
    // Every rank issues this one every iteration, unused parameters or not, to keep in step.
    if (!parameters.empty()) {
      used = used.to(parameters.front().tensor.device());
      detail::wait_for_device_writes(used);
      used_work = group.all_reduce_async(buffer_of(used), ReduceOp::max);
    }
  }

  const auto wait_start = Clock::now();
  observe_completions(wait_start);
  try {
    for (auto& bucket : buckets) {
      bucket.work->wait();
      if (!bucket.finish_seen) {
        bucket.finished = Clock::now();
        bucket.finish_seen = true;
      }
    }
    if (used_work) used_work->wait();
  } catch (...) {
    drain();
    throw;
  }
  const auto wait_end = Clock::now();

  if (used.defined()) used = used.cpu();
  const std::int32_t* used_flags = used.defined() ? used.data_ptr<std::int32_t>() : nullptr;
  for (std::size_t index = 0; index < parameters.size(); ++index) {
    ReducedParameter& parameter = parameters[index];
    // No rank used it: leave .grad() as it was, as PyTorch does, so every rank's stays the same.
    if (used_flags != nullptr && used_flags[index] == 0) continue;
    at::Tensor& grad = parameter.tensor.mutable_grad();
    at::Tensor slot = slot_of(parameter, buckets[parameter.bucket]);
    if (grad.defined()) {
      grad.copy_(slot);
    } else {
      grad = slot.clone();  // locally unused, used elsewhere: the average is its gradient
    }
  }

  // Buckets ran one after another on the group's thread: count each from when it could start.
  Clock::time_point previous_end{};
  for (const auto& bucket : buckets) {
    const Clock::time_point start = std::max(bucket.launched, previous_end);
    if (bucket.finished > start) stats.all_reduce_seconds += seconds_between(start, bucket.finished);
    previous_end = std::max(previous_end, bucket.finished);
  }
  stats.wait_seconds += seconds_between(wait_start, wait_end);
  stats.synchronized_backwards += 1;
  stats.buckets_reduced += static_cast<std::int64_t>(buckets.size());
  for (const auto& bucket : buckets) stats.bytes_reduced += bucket.flat.numel() * bucket.flat.element_size();
}

void Reducer::State::drain() noexcept {
  for (auto& bucket : buckets) {
    if (!bucket.work) continue;
    try {
      bucket.work->wait();
    } catch (...) {
      // The failure reaches the trainer through the finish that noticed it, or the next collective.
    }
    bucket.work.reset();
  }
}

}  // namespace ddprun::torch

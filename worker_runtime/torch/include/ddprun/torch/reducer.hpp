#pragma once
/// Reducer: the gradient synchronization behind DistributedDataParallel, independent of the module's
/// type. It owns the buckets, the autograd hooks and the statistics; DistributedDataParallel<M> only
/// adds the typed forward.
///
/// How an iteration goes (the same design as PyTorch's C++ Reducer):
///   - every parameter that requires a gradient gets a post-hook on its grad accumulator, so the hook
///     runs once per backward, after the parameter's .grad() holds the accumulated gradient;
///   - the hook copies .grad() into its slot of the parameter's bucket; when a bucket's last
///     parameter arrives, the bucket (and any later-indexed buckets already complete, strictly in
///     bucket order so that every rank issues the same collectives in the same order) is handed to
///     ProcessGroup::all_reduce_async(avg): the group's thread reduces it while autograd goes on;
///   - the first hook of a backward queues an autograd-engine callback that runs when backward ends:
///     it waits for every bucket and copies the averages back into .grad(), so loss.backward()
///     returns with synchronized gradients, as in PyTorch.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "ddprun/process_group.hpp"

namespace ddprun::torch {

/// PyTorch's DistributedDataParallel arguments that ddprun implements, with PyTorch's defaults.
struct DdpOptions {
  /// A bucket is filled up to this many bytes of gradients (bucket_cap_mb = 25 in PyTorch).
  std::size_t bucket_cap_bytes = std::size_t{25} << 20;
  /// The first bucket (the last layers, whose gradients come first) is capped smaller, so that
  /// communication starts early in backward (PyTorch's _DEFAULT_FIRST_BUCKET_BYTES, 1 MiB).
  std::size_t first_bucket_cap_bytes = std::size_t{1} << 20;
  /// Broadcast the module's buffers (BatchNorm running statistics) from rank 0 before each forward
  /// that runs with gradients enabled and synchronization on (not inside no_sync()).
  bool broadcast_buffers = true;
  /// Parameters that get no gradient in a backward count as ready with a zero gradient when backward
  /// ends; costs one small extra all_reduce per iteration (which parameters any rank used), so that a
  /// parameter no rank used keeps its .grad() untouched on every rank. Without it, such a parameter
  /// is an error (see finish_gradient_synchronization).
  bool find_unused_parameters = false;
};

/// Counters for benchmarks, summed over the synchronized backward passes since construction.
/// Completion times are observed, not reported by the backend: a bucket counts as finished when a
/// later hook or the end-of-backward wait first sees it completed, so all_reduce_seconds is a
/// slight overestimate.
struct DdpStats {
  std::int64_t synchronized_backwards = 0;  ///< backward passes whose gradients were all-reduced
  std::int64_t buckets_reduced = 0;
  /// Buckets whose all_reduce was launched by a gradient hook, i.e. while backward still ran (the
  /// others start at its end: the last bucket, or buckets completed by find_unused_parameters).
  std::int64_t buckets_launched_during_backward = 0;
  std::int64_t bytes_reduced = 0;
  /// Time the group spent on the buckets' all_reduces. The group runs them one after another, so a
  /// bucket's share runs from the later of its launch and the previous bucket's end to its own end.
  double all_reduce_seconds = 0;
  /// Per backward: time blocked at its end waiting for buckets (communication not hidden).
  double wait_seconds = 0;
  /// The share of the all_reduce span that overlapped with backward: 1 - wait / all_reduce.
  double hidden_share() const { return all_reduce_seconds > 0 ? 1.0 - wait_seconds / all_reduce_seconds : 0.0; }
};

class Reducer {
 public:
  /// Collective (every rank, same module structure): broadcasts parameters and buffers from rank 0,
  /// builds the buckets and installs the hooks. `group` must outlive the Reducer. Throws
  /// ddprun::Error for a parameter whose dtype has no ddprun::DataType (e.g. uint8, complex).
  Reducer(std::shared_ptr<::torch::nn::Module> module, ProcessGroup& group, DdpOptions options = {});
  /// Removes the hooks; a backward still in flight must have ended.
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  /// Called by DistributedDataParallel before each forward: broadcasts buffers from rank 0 when the
  /// options and the state (grad mode on, sync on) ask for it. Collective when it broadcasts.
  void prepare_forward();

  /// Ends the current backward's synchronization: launches what remains (find_unused_parameters),
  /// waits every bucket and writes the averages into .grad(). Runs by itself at the end of every
  /// backward (an autograd-engine callback); calling it again, or outside backward, does nothing.
  /// Throws ddprun::Error naming the parameters that received no gradient when a bucket cannot
  /// complete without find_unused_parameters, e.g. "parameters that received no gradient:
  /// fc3.weight, fc3.bias — pass find_unused_parameters=true"; rethrows a failed all_reduce.
  void finish_gradient_synchronization();

  /// false: backward leaves gradients local and accumulating (no_sync); true: the next backward
  /// all-reduces the accumulated gradients.
  void set_require_gradient_sync(bool enabled);
  bool require_gradient_sync() const;

  DdpStats stats() const;
  /// The parameter names of each bucket, bucket 0 first (reverse registration order): for tests.
  std::vector<std::vector<std::string>> bucket_layout() const;

  ProcessGroup& group() const;
  const DdpOptions& options() const;

  struct State;  ///< shared with the hooks, which outlive nothing: they hold it weakly

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ddprun::torch

#pragma once
/// DistributedSampler: which samples of a dataset this rank reads, with the semantics of PyTorch's
/// torch.utils.data.distributed.DistributedSampler.
///
/// The order, exactly (n = dataset_size, r = num_replicas):
///   1. base order: 0, 1, ..., n-1; with shuffle, a permutation of it that depends only on
///      (seed + epoch) — see below.
///   2. size() = ceil(n / r), or floor(n / r) with drop_last; total = size() * r.
///   3. without drop_last, the base order is padded to `total` by repeating it from its start
///      (position i >= n holds base[i mod n]), so every rank gets the same count; with drop_last
///      it is cut to its first `total` entries.
///   4. rank k takes positions k, k + r, k + 2r, ... of that list.
/// With shuffle=false, steps 2-4 and so every index list equal PyTorch's for the same
/// (n, r, rank, drop_last); a test compares them against Debian's python3-torch.
///
/// Shuffle: PyTorch permutes with torch.randperm on a generator seeded seed + epoch, which cannot
/// be reproduced without torch. ddprun's permutation is its own, documented and portable (the same
/// on every rank, compiler and standard library): std::mt19937_64 seeded (seed + epoch) modulo
/// 2^64, then Fisher-Yates from the back — for i = n-1 down to 1, swap base[i] with base[j], j drawn
/// uniformly from [0, i] by rejection (draw x until x >= (2^64 - (i+1)) mod (i+1), j = x mod (i+1)).
/// So shuffled orders differ from PyTorch's; they are equal across ranks, which is what matters.
///
/// Example:
///   ddprun::DistributedSampler sampler(dataset.size(), group->size(), group->rank(), {.seed = 42});
///   for (int epoch = 0; epoch < epochs; ++epoch) {
///     sampler.set_epoch(epoch);  // a new permutation each epoch, as in PyTorch
///     for (std::int64_t index : sampler.indices()) train_on(dataset[index]);
///   }
#include <cstdint>
#include <vector>

namespace ddprun {

struct Identity;

/// PyTorch's defaults: shuffle, seed 0, keep the tail by padding.
struct SamplerOptions {
  bool shuffle = true;
  std::uint64_t seed = 0;  ///< must be the same on every rank
  bool drop_last = false;  ///< true: drop the tail that does not divide evenly instead of padding
};

class DistributedSampler {
 public:
  /// Throws ddprun::Error when dataset_size < 0, num_replicas < 1 or rank is not in [0, num_replicas).
  DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank, SamplerOptions options = {});
  /// num_replicas and rank from the identity (world_size, rank).
  DistributedSampler(std::int64_t dataset_size, const Identity& identity, SamplerOptions options = {});

  /// Selects the permutation of an epoch (shuffle only); call before each epoch, on every rank.
  void set_epoch(std::int64_t epoch) { epoch_ = epoch; }
  std::int64_t epoch() const { return epoch_; }

  /// This rank's dataset indices for the current epoch, in order; size() of them.
  std::vector<std::int64_t> indices() const;
  /// Indices per rank (PyTorch's num_samples, len(sampler)).
  std::int64_t size() const { return num_samples_; }
  /// size() * num_replicas: the padded (or cut) length of the whole epoch.
  std::int64_t total_size() const { return num_samples_ * num_replicas_; }

  std::int64_t dataset_size() const { return dataset_size_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  const SamplerOptions& options() const { return options_; }

 private:
  std::int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  SamplerOptions options_;
  std::int64_t epoch_ = 0;
  std::int64_t num_samples_;
};

/// The base order of step 1 for (n, seed + epoch): 0..n-1 permuted as documented above. Public so
/// that other languages' readers of a ddprun job can reproduce it.
std::vector<std::int64_t> shuffled_order(std::int64_t n, std::uint64_t seed_plus_epoch);

}  // namespace ddprun

#include "ddprun/sampler.hpp"

#include <numeric>
#include <random>
#include <string>
#include <utility>

#include "ddprun/error.hpp"
#include "ddprun/identity.hpp"

namespace ddprun {
namespace {

/// Uniform in [0, bound) by rejection: std::uniform_int_distribution's algorithm is left to each
/// standard library, and the order must be the same everywhere.
std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;  // (2^64 - bound) mod bound
  for (;;) {
    std::uint64_t x = engine();
    if (x >= threshold) return x % bound;
  }
}

}  // namespace

std::vector<std::int64_t> shuffled_order(std::int64_t n, std::uint64_t seed_plus_epoch) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::mt19937_64 engine(seed_plus_epoch);
  for (std::int64_t i = n - 1; i >= 1; --i) {
    auto j = static_cast<std::int64_t>(uniform_below(engine, static_cast<std::uint64_t>(i) + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

DistributedSampler::DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank, SamplerOptions options)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  if (dataset_size < 0) throw Error("DistributedSampler: dataset size " + std::to_string(dataset_size) + " is negative");
  if (num_replicas < 1) {
    throw Error("DistributedSampler: num_replicas=" + std::to_string(num_replicas) + " must be at least 1");
  }
  if (rank < 0 || rank >= num_replicas) {
    throw Error("DistributedSampler: rank=" + std::to_string(rank) + " is not in [0, " +
                std::to_string(num_replicas - 1) + "]");
  }
  // PyTorch: drop_last and an uneven split -> ceil((n - r) / r), which is floor(n / r); else ceil(n / r).
  num_samples_ = dataset_size / num_replicas + (!options.drop_last && dataset_size % num_replicas != 0 ? 1 : 0);
}

DistributedSampler::DistributedSampler(std::int64_t dataset_size, const Identity& identity, SamplerOptions options)
    : DistributedSampler(dataset_size, identity.world_size, identity.rank, options) {}

std::vector<std::int64_t> DistributedSampler::indices() const {
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(num_samples_));
  if (num_samples_ == 0) return mine;
  // Without shuffle the base order is the identity: skip building it.
  std::vector<std::int64_t> base;
  if (options_.shuffle) base = shuffled_order(dataset_size_, options_.seed + static_cast<std::uint64_t>(epoch_));
  const std::int64_t total = total_size();
  for (std::int64_t position = rank_; position < total; position += num_replicas_) {
    // Padding repeats the base order from its start; drop_last never reaches past n.
    std::int64_t i = position % dataset_size_;
    mine.push_back(options_.shuffle ? base[static_cast<std::size_t>(i)] : i);
  }
  return mine;
}

}  // namespace ddprun

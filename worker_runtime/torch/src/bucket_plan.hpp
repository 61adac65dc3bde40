#pragma once
/// Which parameters share a bucket: PyTorch's compute_bucket_assignment_by_size, as a pure function.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddprun::torch::detail {

struct BucketCandidate {
  std::size_t bytes = 0;
  std::int64_t group_key = 0;  ///< tensors of different keys (dtype, device) never share a bucket
};

/// `tensors` in the order their gradients are expected (reverse registration order). Each key has
/// an open bucket that is closed once it holds at least its limit: `first_cap_bytes` for the key's
/// first bucket, `cap_bytes` after. Returns the buckets as indices into `tensors`, ordered by their
/// first tensor, so that bucket 0 is the one expected to be ready first.
std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<BucketCandidate>& tensors,
                                                   std::size_t first_cap_bytes, std::size_t cap_bytes);

}  // namespace ddprun::torch::detail

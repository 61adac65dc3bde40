// Bucket assignment by size, as PyTorch's Reducer does it.
#include "bucket_plan.hpp"

#include <algorithm>
#include <map>

namespace ddprun::torch::detail {

std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<BucketCandidate>& tensors,
                                                   std::size_t first_cap_bytes, std::size_t cap_bytes) {
  struct Open {
    std::vector<std::size_t> members;
    std::size_t bytes = 0;
    bool first = true;
  };
  std::map<std::int64_t, Open> open;
  std::vector<std::vector<std::size_t>> buckets;
  for (std::size_t index = 0; index < tensors.size(); ++index) {
    Open& bucket = open[tensors[index].group_key];
    bucket.members.push_back(index);
    bucket.bytes += tensors[index].bytes;
    if (bucket.bytes >= (bucket.first ? first_cap_bytes : cap_bytes)) {
      buckets.push_back(std::move(bucket.members));
      bucket.members.clear();
      bucket.bytes = 0;
      bucket.first = false;
    }
  }
  for (auto& [key, bucket] : open) {
    if (!bucket.members.empty()) buckets.push_back(std::move(bucket.members));
  }
  // Members are ascending within a bucket, so a bucket's first member is its smallest index.
  std::sort(buckets.begin(), buckets.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return buckets;
}

}  // namespace ddprun::torch::detail

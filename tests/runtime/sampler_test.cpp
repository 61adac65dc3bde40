// DistributedSampler against PyTorch's own (Debian's python3-torch) where the order is defined to
// match — shuffle=false, padding, drop_last — and the documented properties of ddprun's shuffle.
#include "ddprun/sampler.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "ddprun/error.hpp"
#include "ddprun/identity.hpp"

namespace ddprun {
namespace {

/// Debian's interpreter, the one with python3-torch (the default python3 may be another).
constexpr const char* kSystemPython = "/usr/bin/python3";

// One line per (n, replicas, rank, drop_last): "n r rank drop_last len index...". Exits 77 without torch.
constexpr const char* kPyTorchScript = R"PY(
import sys
try:
    from torch.utils.data.distributed import DistributedSampler
except Exception:
    sys.exit(77)
for n in [0, 1, 2, 3, 4, 5, 7, 8, 10, 16, 17, 31, 100]:
    for r in [1, 2, 3, 4, 5, 7, 8, 13]:
        for drop_last in [0, 1]:
            for rank in range(r):
                s = DistributedSampler(range(n), num_replicas=r, rank=rank, shuffle=False, drop_last=bool(drop_last))
                print(n, r, rank, drop_last, len(s), *list(s))
)PY";

using Key = std::tuple<std::int64_t, int, int, bool>;  // n, replicas, rank, drop_last
struct Expected {
  std::int64_t size = 0;
  std::vector<std::int64_t> indices;
};

/// PyTorch's index lists for the grid; empty when torch cannot be run here.
std::map<Key, Expected> pytorch_grid() {
  std::string command = std::string(kSystemPython) + " -c '" + kPyTorchScript + "' 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string output;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, got);
  int status = ::pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};

  std::map<Key, Expected> grid;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::int64_t n = 0;
    int replicas = 0, rank = 0, drop_last = 0;
    Expected expected;
    fields >> n >> replicas >> rank >> drop_last >> expected.size;
    for (std::int64_t index = 0; fields >> index;) expected.indices.push_back(index);
    grid[Key{n, replicas, rank, drop_last != 0}] = std::move(expected);
  }
  return grid;
}

TEST(DistributedSampler, MatchesPyTorchWithoutShuffle) {
  std::map<Key, Expected> grid = pytorch_grid();
  if (grid.empty()) GTEST_SKIP() << kSystemPython << " with torch (Debian's python3-torch) is not available";
  ASSERT_GT(grid.size(), 1000u);
  for (const auto& [key, expected] : grid) {
    auto [n, replicas, rank, drop_last] = key;
    DistributedSampler sampler(n, replicas, rank, {.shuffle = false, .drop_last = drop_last});
    SCOPED_TRACE(testing::Message() << "n=" << n << " replicas=" << replicas << " rank=" << rank
                                    << " drop_last=" << drop_last);
    EXPECT_EQ(sampler.size(), expected.size);
    EXPECT_EQ(sampler.indices(), expected.indices);
  }
}

TEST(DistributedSampler, PaddingRepeatsFromTheStart) {
  // 10 samples on 4 ranks: 12 positions, the last two repeat indices 0 and 1.
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(DistributedSampler(10, 4, 0, {.shuffle = false}).indices(), (V{0, 4, 8}));
  EXPECT_EQ(DistributedSampler(10, 4, 2, {.shuffle = false}).indices(), (V{2, 6, 0}));
  EXPECT_EQ(DistributedSampler(10, 4, 3, {.shuffle = false}).indices(), (V{3, 7, 1}));
  EXPECT_EQ(DistributedSampler(10, 4, 3, {.shuffle = false, .drop_last = true}).indices(), (V{3, 7}));
  // Fewer samples than ranks: the base order repeats as often as needed.
  EXPECT_EQ(DistributedSampler(2, 5, 4, {.shuffle = false}).indices(), (V{0}));
  EXPECT_EQ(DistributedSampler(2, 5, 4, {.shuffle = false, .drop_last = true}).indices(), V{});
  EXPECT_EQ(DistributedSampler(0, 3, 1).indices(), V{});
}

TEST(DistributedSampler, ShuffleIsAPermutationSharedByAllRanks) {
  const std::int64_t n = 103;
  const int replicas = 4;
  std::multiset<std::int64_t> seen;
  std::vector<std::int64_t> base = shuffled_order(n, 7 + 3);
  for (int rank = 0; rank < replicas; ++rank) {
    DistributedSampler sampler(n, replicas, rank, {.seed = 7});
    sampler.set_epoch(3);
    std::vector<std::int64_t> mine = sampler.indices();
    ASSERT_EQ(static_cast<std::int64_t>(mine.size()), sampler.size());
    for (std::size_t j = 0; j < mine.size(); ++j) {
      // Position rank + j * replicas of the padded base order.
      EXPECT_EQ(mine[j], base[(rank + j * replicas) % n]);
    }
    seen.insert(mine.begin(), mine.end());
  }
  // 104 positions: every index once, plus base[0] repeated as padding.
  EXPECT_EQ(seen.size(), 104u);
  for (std::int64_t index = 0; index < n; ++index) EXPECT_GE(seen.count(index), 1u) << index;
  EXPECT_EQ(seen.count(base[0]), 2u);
}

TEST(DistributedSampler, ShuffleDependsOnSeedPlusEpoch) {
  DistributedSampler a(50, 2, 1, {.seed = 1});
  DistributedSampler b(50, 2, 1, {.seed = 1});
  EXPECT_EQ(a.indices(), b.indices());
  b.set_epoch(1);
  EXPECT_NE(a.indices(), b.indices());
  DistributedSampler c(50, 2, 1, {.seed = 2});
  EXPECT_EQ(b.indices(), c.indices());  // 1 + 1 == 2 + 0, as in PyTorch's seed + epoch
  EXPECT_EQ(b.epoch(), 1);
}

TEST(DistributedSampler, ShuffledOrderIsPinned) {
  // The documented algorithm (mt19937_64, rejection, Fisher-Yates from the back) on every platform
  // (checked once against an independent Python implementation of mt19937_64):
  // a change here changes which samples each rank of an existing job reads.
  std::vector<std::int64_t> order = shuffled_order(10, 0);
  std::vector<std::int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(order, (std::vector<std::int64_t>{7, 2, 0, 8, 3, 9, 6, 1, 5, 4}));
  EXPECT_EQ(shuffled_order(0, 5), std::vector<std::int64_t>{});
  EXPECT_EQ(shuffled_order(1, 5), std::vector<std::int64_t>{0});
}

TEST(DistributedSampler, FromIdentityAndSizes) {
  Identity id;
  id.rank = 2;
  id.world_size = 3;
  DistributedSampler sampler(8, id, {.shuffle = false});
  EXPECT_EQ(sampler.rank(), 2);
  EXPECT_EQ(sampler.num_replicas(), 3);
  EXPECT_EQ(sampler.size(), 3);
  EXPECT_EQ(sampler.total_size(), 9);
  EXPECT_EQ(sampler.indices(), (std::vector<std::int64_t>{2, 5, 0}));
  EXPECT_EQ(DistributedSampler(8, id, {.drop_last = true}).size(), 2);
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(10, 0, 0), Error);
  EXPECT_THROW(DistributedSampler(10, 2, 2), Error);
  EXPECT_THROW(DistributedSampler(10, 2, -1), Error);
  EXPECT_THROW(DistributedSampler(-1, 2, 0), Error);
  try {
    DistributedSampler(10, 4, 4);
    ADD_FAILURE() << "no ddprun::Error thrown";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "DistributedSampler: rank=4 is not in [0, 3]");
  }
}

}  // namespace
}  // namespace ddprun

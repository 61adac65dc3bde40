// (a) DDP over N ranks with global batch B ends with the parameters of one process with batch B;
// (b) every rank holds bit-identical parameters afterwards. Each rank also trains the one-process
// reference itself (no collectives), so no result has to travel back to the test process.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "ddprun/torch/ddp.hpp"
#include "ranks.hpp"

namespace {

using ddprun::ProcessGroup;
using ddprun::torch::DdpOptions;
using ddprun::torch::DistributedDataParallel;
using namespace ddptest;

constexpr int steps = 6;
constexpr std::int64_t global_batch = 24;

/// Every rank's `flat` (the same length everywhere) is bit-identical to rank 0's.
int expect_identical_across_ranks(ProcessGroup& group, const at::Tensor& flat) {
  at::Tensor all = at::empty({group.size() * flat.numel()}, flat.options());
  group.all_gather(ddprun::torch::buffer_of(flat), ddprun::torch::buffer_of(all));
  int failures = 0;
  for (int rank = 1; rank < group.size(); ++rank) {
    if (std::memcmp(all.data_ptr<float>(), all.data_ptr<float>() + rank * flat.numel(),
                    static_cast<std::size_t>(flat.numel()) * sizeof(float)) != 0) {
      std::fprintf(stderr, "rank %d's parameters differ from rank 0's\n", rank);
      ++failures;
    }
  }
  return failures;
}

/// Trains a DDP ToyModel on this rank's slice of each global batch and, beside it, a local
/// ToyModel on the whole batch. Returns the number of failed checks.
int train_and_compare(ProcessGroup& group, DdpOptions options, std::size_t expected_min_buckets) {
  int failures = 0;
  ::torch::manual_seed(7);
  ToyModel reference;  // rank 0's initial weights: DDP broadcasts those
  ::torch::manual_seed(7 + group.rank());
  ToyModel model;
  DistributedDataParallel ddp(model, group, options);
  if (ddp.reducer().bucket_layout().size() < expected_min_buckets) {
    std::fprintf(stderr, "expected at least %zu buckets, got %zu\n", expected_min_buckets,
                 ddp.reducer().bucket_layout().size());
    ++failures;
  }
  failures += expect_close(flat_parameters(*model), flat_parameters(*reference), 0, 0, "after construction");

  ::torch::optim::SGD optimizer(ddp.parameters(), 0.1);
  ::torch::optim::SGD reference_optimizer(reference->parameters(), 0.1);
  const std::int64_t local_batch = global_batch / group.size();
  for (int step = 0; step < steps; ++step) {
    auto [inputs, targets] = toy_batch(step, global_batch);
    optimizer.zero_grad();
    auto mine = inputs.narrow(0, group.rank() * local_batch, local_batch);
    auto my_targets = targets.narrow(0, group.rank() * local_batch, local_batch);
    ::torch::mse_loss(ddp(mine), my_targets).backward();
    optimizer.step();

    reference_optimizer.zero_grad();
    ::torch::mse_loss(reference->forward(inputs), targets).backward();
    reference_optimizer.step();
  }
  failures += expect_close(flat_parameters(*model), flat_parameters(*reference), 1e-5, 1e-7, "after training");
  failures += expect_identical_across_ranks(group, flat_parameters(*model));
  const auto stats = ddp.stats();
  if (stats.synchronized_backwards != steps) {
    std::fprintf(stderr, "stats: %lld synchronized backwards, expected %d\n",
                 static_cast<long long>(stats.synchronized_backwards), steps);
    ++failures;
  }
  return failures;
}

TEST(DdpEquivalence, TwoRanksMatchOneProcessWithTheWholeBatch) {
  EXPECT_EQ(run_ranks(2, [](ProcessGroup& group) { return train_and_compare(group, DdpOptions{}, 1); }), 0);
}

TEST(DdpEquivalence, SmallBucketsGiveTheSameResult) {
  DdpOptions options;
  options.first_bucket_cap_bytes = 64;  // net2.bias (20 bytes) + net2.weight (200): one bucket
  options.bucket_cap_bytes = 256;       // then net1.bias + net1.weight
  EXPECT_EQ(run_ranks(2, [&](ProcessGroup& group) { return train_and_compare(group, options, 2); }), 0);
}

TEST(DdpEquivalence, ThreeRanks) {
  DdpOptions options;
  options.first_bucket_cap_bytes = 1;  // one parameter per bucket: four buckets
  options.bucket_cap_bytes = 1;
  EXPECT_EQ(run_ranks(3, [&](ProcessGroup& group) { return train_and_compare(group, options, 4); }), 0);
}

TEST(DdpEquivalence, OneRankIsPlainTraining) {
  EXPECT_EQ(run_ranks(1, [](ProcessGroup& group) { return train_and_compare(group, DdpOptions{}, 1); }), 0);
}

TEST(DdpEquivalence, RanksWithDifferentDataEndBitIdentical) {
  EXPECT_EQ(run_ranks(2,
                      [](ProcessGroup& group) {
                        ::torch::manual_seed(group.rank());
                        ToyModel model;
                        DistributedDataParallel ddp(model, group, DdpOptions{.bucket_cap_bytes = 128,
                                                                             .first_bucket_cap_bytes = 64});
                        ::torch::optim::Adam optimizer(ddp.parameters(), 0.01);
                        for (int step = 0; step < 20; ++step) {
                          auto [inputs, targets] = toy_batch(100 * group.rank() + step, 8);
                          optimizer.zero_grad();
                          ::torch::mse_loss(ddp(inputs), targets).backward();
                          optimizer.step();
                        }
                        return expect_identical_across_ranks(group, flat_parameters(*model));
                      }),
            0);
}

}  // namespace

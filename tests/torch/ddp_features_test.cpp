// no_sync accumulation, unused parameters (the error and find_unused_parameters), buffer
// broadcast, the bucket layout, and the dtype mapping.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "ddprun/error.hpp"
#include "ddprun/torch/ddp.hpp"
#include "ranks.hpp"

namespace {

using ddprun::ProcessGroup;
using ddprun::torch::DdpOptions;
using ddprun::torch::DistributedDataParallel;
using namespace ddptest;

int check(bool ok, const std::string& what) {
  if (!ok) std::fprintf(stderr, "check failed: %s\n", what.c_str());
  return ok ? 0 : 1;
}

at::Tensor flat_gradients(::torch::nn::Module& module) {
  std::vector<at::Tensor> parts;
  for (const auto& parameter : module.parameters()) parts.push_back(parameter.grad().reshape({-1}).clone());
  return at::cat(parts);
}

/// Rank r's micro-batch j of 4 samples.
std::pair<at::Tensor, at::Tensor> micro_batch(int rank, int j) { return toy_batch(10 * rank + j, 4); }

TEST(DdpNoSync, AccumulatedBackwardsEqualOneSyncedStepOverTheCombinedBatch) {
  EXPECT_EQ(run_ranks(2,
                      [](ProcessGroup& group) {
                        int failures = 0;
                        ::torch::manual_seed(3);
                        ToyModel reference;
                        ::torch::manual_seed(3);
                        ToyModel model;
                        DistributedDataParallel ddp(model, group);
                        {
                          auto guard = ddp.no_sync();
                          auto [x, y] = micro_batch(group.rank(), 0);
                          ::torch::mse_loss(ddp(x), y).backward();
                        }
                        // Not synchronized: exactly this rank's own gradient.
                        {
                          auto [x, y] = micro_batch(group.rank(), 0);
                          ::torch::mse_loss(reference->forward(x), y).backward();
                          failures += expect_close(flat_gradients(*model), flat_gradients(*reference), 0, 0,
                                                   "gradient after the no_sync backward");
                          reference->zero_grad();
                        }
                        auto [x, y] = micro_batch(group.rank(), 1);
                        ::torch::mse_loss(ddp(x), y).backward();
                        failures += check(ddp.stats().synchronized_backwards == 1, "one synchronized backward");

                        // The same gradient in one process: the sum over micro-batches, averaged over ranks.
                        at::Tensor loss = at::zeros({});
                        for (int rank = 0; rank < group.size(); ++rank) {
                          for (int j = 0; j < 2; ++j) {
                            auto [rx, ry] = micro_batch(rank, j);
                            loss = loss + ::torch::mse_loss(reference->forward(rx), ry);
                          }
                        }
                        (loss / group.size()).backward();
                        failures += expect_close(flat_gradients(*model), flat_gradients(*reference), 1e-5, 1e-7,
                                                 "accumulated, synchronized gradient");
                        return failures;
                      }),
            0);
}

/// fc3 is registered but used only when `use_fc3` is set.
struct PartlyUsedImpl : ::torch::nn::Module {
  PartlyUsedImpl() {
    fc1 = register_module("fc1", ::torch::nn::Linear(10, 8));
    fc2 = register_module("fc2", ::torch::nn::Linear(8, 5));
    fc3 = register_module("fc3", ::torch::nn::Linear(8, 5));
  }
  at::Tensor forward(const at::Tensor& x, bool use_fc3) {
    at::Tensor hidden = ::torch::relu(fc1(x));
    return use_fc3 ? fc2(hidden) + fc3(hidden) : fc2(hidden);
  }
  ::torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(PartlyUsed);

TEST(DdpUnusedParameters, WithoutTheOptionBackwardFailsNamingThem) {
  EXPECT_EQ(run_ranks(2,
                      [](ProcessGroup& group) {
                        PartlyUsed model;
                        DistributedDataParallel ddp(model, group);
                        auto [x, y] = toy_batch(0, 4);
                        try {
                          ::torch::mse_loss(ddp(x, false), y).backward();
                        } catch (const ddprun::Error& error) {
                          const std::string message = error.what();
                          int failures = check(message.find("fc3.weight, fc3.bias") != std::string::npos, message);
                          failures += check(message.find("find_unused_parameters=true") != std::string::npos, message);
                          failures += check(message.find("fc2") == std::string::npos, message);
                          return failures;
                        } catch (const std::exception& error) {
                          std::fprintf(stderr, "not a ddprun::Error: %s\n", error.what());
                          return 1;
                        }
                        std::fprintf(stderr, "backward did not fail\n");
                        return 1;
                      }),
            0);
}

TEST(DdpUnusedParameters, WithTheOptionRanksStayInStep) {
  EXPECT_EQ(run_ranks(2,
                      [](ProcessGroup& group) {
                        int failures = 0;
                        ::torch::manual_seed(group.rank());
                        PartlyUsed model;
                        DistributedDataParallel ddp(model, group, DdpOptions{.find_unused_parameters = true});
                        ::torch::optim::SGD optimizer(ddp.parameters(), 0.1);
                        for (int step = 0; step < 3; ++step) {
                          auto [x, y] = toy_batch(step + 10 * group.rank(), 4);
                          optimizer.zero_grad();
                          ::torch::mse_loss(ddp(x, false), y).backward();  // no rank uses fc3
                          failures += check(!model->fc3->weight.grad().defined() ||
                                                model->fc3->weight.grad().abs().sum().item<float>() == 0,
                                            "fc3 unused everywhere keeps an empty gradient");
                          optimizer.step();
                        }
                        failures += check(!model->fc3->weight.grad().defined(), "fc3 never got a gradient");
                        // Used on rank 0 only: rank 1 receives the average as its gradient.
                        optimizer.zero_grad();
                        auto [x, y] = toy_batch(50 + group.rank(), 4);
                        ::torch::mse_loss(ddp(x, group.rank() == 0), y).backward();
                        failures += check(model->fc3->weight.grad().defined(), "fc3 got the averaged gradient");
                        optimizer.step();
                        // Identical parameters on both ranks.
                        at::Tensor flat = flat_parameters(*model);
                        at::Tensor all = at::empty({2 * flat.numel()});
                        group.all_gather(ddprun::torch::buffer_of(flat), ddprun::torch::buffer_of(all));
                        failures += check(std::memcmp(all.data_ptr<float>(), all.data_ptr<float>() + flat.numel(),
                                                      flat.numel() * sizeof(float)) == 0,
                                          "ranks hold identical parameters");
                        return failures;
                      }),
            0);
}

struct NormedImpl : ::torch::nn::Module {
  NormedImpl() {
    fc = register_module("fc", ::torch::nn::Linear(10, 6));
    norm = register_module("norm", ::torch::nn::BatchNorm1d(6));
  }
  at::Tensor forward(const at::Tensor& x) { return norm(fc(x)); }
  ::torch::nn::Linear fc{nullptr};
  ::torch::nn::BatchNorm1d norm{nullptr};
};
TORCH_MODULE(Normed);

/// Every rank's copy of `tensor` gathered: [world, numel].
at::Tensor gather(ProcessGroup& group, const at::Tensor& tensor) {
  at::Tensor flat = tensor.detach().reshape({-1}).contiguous();
  at::Tensor all = at::empty({group.size() * flat.numel()}, flat.options());
  group.all_gather(ddprun::torch::buffer_of(flat), ddprun::torch::buffer_of(all));
  return all.reshape({group.size(), flat.numel()});
}

TEST(DdpBuffers, RunningStatisticsComeFromRankZero) {
  EXPECT_EQ(run_ranks(2,
                      [](ProcessGroup& group) {
                        int failures = 0;
                        Normed model;
                        model->norm->running_mean.fill_(static_cast<float>(group.rank() + 1));
                        DistributedDataParallel ddp(model, group);
                        auto at_construction = gather(group, model->norm->running_mean);
                        failures += check(at_construction.eq(1).all().item<bool>(), "construction broadcasts buffers");

                        auto [x, y] = toy_batch(group.rank(), 8);  // different data: statistics diverge
                        ddp(x);
                        auto after_first = gather(group, model->norm->running_mean);
                        failures += check(!after_first[0].equal(after_first[1]), "local forwards update locally");
                        const at::Tensor rank0_stats = after_first[0].clone();

                        model->eval();  // no update by this forward, but still a broadcast before it
                        ddp(x);
                        auto after_second = gather(group, model->norm->running_mean);
                        failures += check(after_second[1].equal(rank0_stats), "rank 1 holds rank 0's statistics");
                        failures += check(after_second[0].equal(rank0_stats), "rank 0's are unchanged");
                        auto batches = gather(group, model->norm->num_batches_tracked);
                        failures += check(batches[0].equal(batches[1]), "num_batches_tracked (int64) too");

                        {
                          ::torch::NoGradGuard no_grad;  // evaluation: no collective, ranks may differ
                          if (group.rank() == 1) {
                            ddp(x);
                            ddp(x);
                          }
                        }
                        return failures;
                      }),
            0);
}

TEST(DdpBuckets, ReverseRegistrationOrderAndCap) {
  EXPECT_EQ(run_ranks(1,
                      [](ProcessGroup& group) {
                        PartlyUsed model;
                        DdpOptions options;
                        options.first_bucket_cap_bytes = 100;  // fc3.bias (20 B) + fc3.weight (160 B)
                        options.bucket_cap_bytes = 150;        // closed once it holds 150 B or more
                        DistributedDataParallel ddp(model, group, options);
                        using Layout = std::vector<std::vector<std::string>>;
                        Layout expected{{"fc3.bias", "fc3.weight"},
                                        {"fc2.bias", "fc2.weight"},
                                        {"fc1.bias", "fc1.weight"}};
                        Layout actual = ddp.reducer().bucket_layout();
                        std::string shown;
                        for (const auto& bucket : actual) {
                          shown += "[";
                          for (const auto& name : bucket) shown += name + " ";
                          shown += "]";
                        }
                        return check(actual == expected, "bucket layout " + shown);
                      }),
            0);
}

/// A float32 branch and a float64 branch.
struct MixedImpl : ::torch::nn::Module {
  MixedImpl() {
    single = register_module("single", ::torch::nn::Linear(10, 5));
    twice = register_module("twice", ::torch::nn::Linear(10, 5));
    twice->to(at::kDouble);
  }
  at::Tensor forward(const at::Tensor& x) { return single(x) + twice(x.to(at::kDouble)).to(at::kFloat); }
  ::torch::nn::Linear single{nullptr}, twice{nullptr};
};
TORCH_MODULE(Mixed);

TEST(DdpBuckets, DtypesNeverShareABucket) {
  EXPECT_EQ(run_ranks(2,
                      [](ProcessGroup& group) {
                        ::torch::manual_seed(group.rank());
                        Mixed model;
                        DistributedDataParallel ddp(model, group);
                        int failures = check(ddp.reducer().bucket_layout().size() == 2, "one bucket per dtype");
                        auto [x, y] = toy_batch(group.rank(), 4);
                        ::torch::mse_loss(ddp(x), y).backward();
                        for (const auto& parameter : model->parameters()) {
                          auto all = gather(group, parameter.grad());
                          failures += check(all[0].equal(all[1]), "gradients equal on both ranks");
                        }
                        return failures;
                      }),
            0);
}

TEST(TensorBuffer, DtypeMapping) {
  using ddprun::DataType;
  EXPECT_EQ(ddprun::torch::data_type_of(at::kFloat), DataType::float32);
  EXPECT_EQ(ddprun::torch::data_type_of(at::kDouble), DataType::float64);
  EXPECT_EQ(ddprun::torch::data_type_of(at::kBFloat16), DataType::bfloat16);
  EXPECT_EQ(ddprun::torch::data_type_of(at::kHalf), DataType::float16);
  EXPECT_EQ(ddprun::torch::data_type_of(at::kInt), DataType::int32);
  EXPECT_EQ(ddprun::torch::data_type_of(at::kLong), DataType::int64);
  EXPECT_FALSE(ddprun::torch::data_type_of(at::kByte).has_value());
  for (auto type : {DataType::float32, DataType::float64, DataType::bfloat16, DataType::float16, DataType::int32,
                    DataType::int64}) {
    EXPECT_EQ(ddprun::torch::data_type_of(ddprun::torch::scalar_type_of(type)), type);
  }
}

}  // namespace

// Checkpoints: a round trip restores model, optimizer (momentum), epoch, step, sampler epoch, user
// values and every rank's RNG; the save is atomic (no temporary left behind, a failed write keeps
// the previous checkpoint, and every rank learns of the failure).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "ddprun/error.hpp"
#include "ddprun/torch/checkpoint.hpp"
#include "ddprun/torch/ddp.hpp"
#include "ranks.hpp"

namespace {

using ddprun::ProcessGroup;
using ddprun::torch::CheckpointState;
using ddprun::torch::DistributedDataParallel;
using namespace ddptest;
namespace fs = std::filesystem;

int check(bool ok, const std::string& what) {
  if (!ok) std::fprintf(stderr, "check failed: %s\n", what.c_str());
  return ok ? 0 : 1;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ddprun-checkpoint-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    folder_ = pattern;
  }
  void TearDown() override { fs::remove_all(folder_); }
  /// Names in the folder, to find leftovers of a save.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder_)) names.push_back(entry.path().filename().string());
    return names;
  }
  fs::path folder_;
};

void train(DistributedDataParallel<ToyModel>& ddp, ::torch::optim::Optimizer& optimizer, int first_step, int steps) {
  const int rank = ddp.group().rank();
  for (int step = first_step; step < first_step + steps; ++step) {
    auto [x, y] = toy_batch(100 * rank + step, 4);
    optimizer.zero_grad();
    ::torch::mse_loss(ddp(x), y).backward();
    optimizer.step();
  }
}

TEST_F(CheckpointTest, RoundTripRestoresEverything) {
  const fs::path path = folder_ / "nested" / "checkpoint.pt";
  EXPECT_EQ(run_ranks(2,
                      [&](ProcessGroup& group) {
                        int failures = 0;
                        ::torch::manual_seed(11);
                        ToyModel model;
                        ::torch::optim::SGD optimizer(model->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
                        failures += check(!ddprun::torch::load_checkpoint(path, *model, &optimizer).has_value(),
                                          "no checkpoint yet: nullopt");
                        DistributedDataParallel ddp(model, group);
                        train(ddp, optimizer, 0, 3);
                        CheckpointState state;
                        state.epoch = 3;
                        state.step = 30;
                        state.sampler_epoch = 2;
                        state.values = {{"best_accuracy_permille", 871}, {"negative", -5}};
                        ::torch::manual_seed(500 + group.rank());  // a rank-specific RNG to restore
                        ddprun::torch::save_checkpoint(path, *model, &optimizer, state, group);
                        const at::Tensor saved = flat_parameters(*model).clone();
                        const at::Tensor draws = at::randn({8});
                        train(ddp, optimizer, 3, 2);
                        const at::Tensor continued = flat_parameters(*model).clone();

                        // A restart: fresh weights and optimizer, then the checkpoint.
                        ::torch::manual_seed(999);
                        ToyModel fresh;
                        ::torch::optim::SGD fresh_optimizer(fresh->parameters(), ::torch::optim::SGDOptions(0.1).momentum(0.9));
                        auto resumed = ddprun::torch::load_checkpoint(path, *fresh, &fresh_optimizer, at::kCPU, group.rank());
                        if (!resumed) return 1 + failures;
                        failures += check(resumed->epoch == 3 && resumed->step == 30 && resumed->sampler_epoch == 2,
                                          "epoch, step, sampler epoch");
                        failures += check(resumed->values == state.values, "user values");
                        failures += check(resumed->world_size == 2, "world size");
                        failures += check(flat_parameters(*fresh).equal(saved), "parameters");
                        failures += check(at::randn({8}).equal(draws), "this rank's RNG state");
                        DistributedDataParallel fresh_ddp(fresh, group);
                        train(fresh_ddp, fresh_optimizer, 3, 2);
                        failures += check(flat_parameters(*fresh).equal(continued),
                                          "training on from the checkpoint = training on (momentum restored)");
                        return failures;
                      }),
            0);
  EXPECT_TRUE(fs::exists(path));
  for (const auto& entry : fs::directory_iterator(path.parent_path())) {
    EXPECT_EQ(entry.path().filename(), "checkpoint.pt") << "a leftover of the save";
  }
}

TEST_F(CheckpointTest, AFailedWriteKeepsThePreviousCheckpointAndFailsEveryRank) {
  const fs::path path = folder_ / "checkpoint.pt";
  EXPECT_EQ(run_ranks(2,
                      [&](ProcessGroup& group) {
                        int failures = 0;
                        ToyModel model;
                        ::torch::optim::SGD optimizer(model->parameters(), 0.1);
                        DistributedDataParallel ddp(model, group);
                        CheckpointState state;
                        state.epoch = 1;
                        ddprun::torch::save_checkpoint(path, *model, &optimizer, state, group);

                        // Rank 0 may write 4 KiB per file from now on: the next save breaks off midway.
                        if (group.rank() == 0) {
                          ::signal(SIGXFSZ, SIG_IGN);  // EFBIG from write() instead of a signal
                          rlimit limit{4096, 4096};
                          ::setrlimit(RLIMIT_FSIZE, &limit);
                        }
                        state.epoch = 2;
                        try {
                          ddprun::torch::save_checkpoint(path, *model, &optimizer, state, group);
                          std::fprintf(stderr, "rank %d: the save did not fail\n", group.rank());
                          ++failures;
                        } catch (const ddprun::Error& error) {
                          const std::string message = error.what();
                          std::fprintf(stderr, "rank %d (expected): %s\n", group.rank(), message.c_str());
                          failures += check(message.find(path.string()) != std::string::npos ||
                                                message.find("checkpoint.pt") != std::string::npos,
                                            "the error names the file: " + message);
                        }
                        auto resumed = ddprun::torch::load_checkpoint(path, *model, &optimizer);
                        failures += check(resumed && resumed->epoch == 1, "the previous checkpoint is intact");
                        return failures;
                      }),
            0);
  EXPECT_EQ(entries(), std::vector<std::string>{"checkpoint.pt"});
}

TEST_F(CheckpointTest, AShapeMismatchIsAClearError) {
  const fs::path path = folder_ / "checkpoint.pt";
  EXPECT_EQ(run_ranks(1,
                      [&](ProcessGroup& group) {
                        ToyModel model;
                        ddprun::torch::save_checkpoint(path, *model, nullptr, CheckpointState{}, group);
                        try {
                          ToyModel changed;
                          changed->net2 = changed->replace_module("net2", ::torch::nn::Linear(10, 7));
                          ddprun::torch::load_checkpoint(path, *changed, nullptr);
                        } catch (const ddprun::Error& error) {
                          const std::string message = error.what();
                          return check(message.find("net2.weight") != std::string::npos &&
                                           message.find("[7, 10]") != std::string::npos,
                                       message);
                        }
                        return 1;
                      }),
            0);
}

}  // namespace

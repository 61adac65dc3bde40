// A C++ trainer as users write it, for launcher_test: started by ddprun, it finds its rank in the
// environment, trains the ToyModel with DistributedDataParallel on its share of each global batch,
// and checks itself against one-process training on the whole batch and against the other ranks.
// Exit status 0 when every check passed.
#include <cstdio>
#include <cstring>

#include "ddprun/identity.hpp"
#include "ddprun/torch/ddp.hpp"
#include "ranks.hpp"

int main() {
  using namespace ddptest;
  try {
    ::torch::set_num_threads(1);
    auto group = ddprun::ProcessGroup::create(ddprun::identity_from_environment());
    ::torch::manual_seed(5);
    ToyModel reference;
    ::torch::manual_seed(5 + group->rank());
    ToyModel model;
    ddprun::torch::DistributedDataParallel ddp(model, *group);
    ::torch::optim::SGD optimizer(ddp.parameters(), 0.1);
    ::torch::optim::SGD reference_optimizer(reference->parameters(), 0.1);
    const std::int64_t global_batch = 12;
    const std::int64_t local_batch = global_batch / group->size();
    for (int step = 0; step < 5; ++step) {
      auto [inputs, targets] = toy_batch(step, global_batch);
      optimizer.zero_grad();
      ::torch::mse_loss(ddp(inputs.narrow(0, group->rank() * local_batch, local_batch)),
                        targets.narrow(0, group->rank() * local_batch, local_batch))
          .backward();
      optimizer.step();
      reference_optimizer.zero_grad();
      ::torch::mse_loss(reference->forward(inputs), targets).backward();
      reference_optimizer.step();
    }
    int failures = expect_close(flat_parameters(*model), flat_parameters(*reference), 1e-5, 1e-7, "vs one process");
    at::Tensor flat = flat_parameters(*model);
    at::Tensor all = at::empty({group->size() * flat.numel()});
    group->all_gather(ddprun::torch::buffer_of(flat), ddprun::torch::buffer_of(all));
    for (int rank = 1; rank < group->size(); ++rank) {
      if (std::memcmp(all.data_ptr<float>(), all.data_ptr<float>() + rank * flat.numel(), flat.numel() * sizeof(float)) != 0) {
        std::fprintf(stderr, "rank %d differs from rank 0\n", rank);
        ++failures;
      }
    }
    std::printf("rank %d: %s\n", group->rank(), failures == 0 ? "ok" : "FAILED");
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ddp_worker: %s\n", error.what());
    return 1;
  }
}

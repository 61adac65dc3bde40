/// demo_checkpoint: the checkpoint example of PyTorch's "Getting Started with Distributed Data
/// Parallel" tutorial, in C++: rank 0 saves the model, every rank waits at a barrier, every rank
/// loads it onto its own device (the tutorial's map_location), and training goes on.
///
/// It checks what the tutorial only implies, and exits 1 when one fails:
///   - after loading, every rank's parameters equal what rank 0 saved, although each rank had
///     overwritten its own with garbage in between (so the load did the work, not the wrapper's
///     initial broadcast), and the saved step count came back;
///   - after more steps, every rank's parameters equal rank 0's, bit for bit.
/// The optimizer is SGD at lr 0.001 as in the tutorial, with momentum 0.9 so that the checkpoint
/// carries optimizer state too.
///
///   build/bin/ddprun --standalone --nproc-per-node 2 build/bin/demo_checkpoint [--path FILE]
/// The default file is <temp dir>/ddprun-demo-checkpoint-<TORCHELASTIC_RUN_ID>/model.checkpoint;
/// rank 0 removes it at the end.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "ddprun/error_report.hpp"
#include "ddprun/torch/checkpoint.hpp"
#include "ddprun/torch/ddp.hpp"
#include "parameter_check.hpp"
#include "toy_model.hpp"
#include "worker_setup.hpp"

namespace {

template <class Model>
void train(Model& ddp_model, torch::optim::Optimizer& optimizer, const c10::Device& device, int steps) {
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    torch::Tensor outputs = ddp_model(torch::randn({20, 10}).to(device));
    torch::Tensor labels = torch::randn({20, 5}).to(device);
    torch::nn::functional::mse_loss(outputs, labels).backward();
    optimizer.step();
  }
}

}  // namespace

int main(int argc, char** argv) {
  ddprun::install_error_handlers();
  std::filesystem::path path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--path" && i + 1 < argc) {
      path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: demo_checkpoint [--path FILE]   (under ddprun, torchrun, mpirun or srun)\n");
      return 2;
    }
  }
  try {
    torch::set_num_threads(1);
    examples::Worker worker = examples::join_job();
    const int rank = worker.rank();
    std::printf("Running DDP checkpoint example on rank %d of %d.\n", rank, worker.world_size());
    std::fflush(stdout);
    const bool default_path = path.empty();
    if (default_path) {
      path = std::filesystem::temp_directory_path() /
             ("ddprun-demo-checkpoint-" + worker.identity.run_id) / "model.checkpoint";
    }

    torch::manual_seed(2000 + rank);  // each rank draws its own data
    demo::ToyModel model;
    model->to(worker.device);
    ddprun::torch::DistributedDataParallel ddp_model(model, *worker.group);
    torch::optim::SGD optimizer(ddp_model.parameters(), torch::optim::SGDOptions(0.001).momentum(0.9));
    train(ddp_model, optimizer, worker.device, 3);

    // Rank 0 saves (atomically), then every rank meets at the barrier inside save_checkpoint.
    const torch::Tensor saved = examples::flat_parameters(*model);
    ddprun::torch::CheckpointState state;
    state.step = 3;
    ddprun::torch::save_checkpoint(path, *model, &optimizer, state, *worker.group);

    // Spoil this rank's copy, then load the file onto this rank's device.
    {
      torch::NoGradGuard no_grad;
      for (auto& parameter : model->parameters()) parameter.fill_(100.0 + rank);
    }
    const auto loaded = ddprun::torch::load_checkpoint(path, *model, &optimizer, worker.device, rank);
    bool ok = true;
    if (!loaded || loaded->step != 3) {
      std::fprintf(stderr, "rank %d: the checkpoint %s did not give back step 3\n", rank, path.c_str());
      ok = false;
    }
    if (!torch::equal(examples::flat_parameters(*model), saved)) {
      std::fprintf(stderr, "rank %d: the loaded parameters differ from the ones rank 0 saved\n", rank);
      ok = false;
    } else {
      std::printf("rank %d: loaded %s: parameters equal what rank 0 saved\n", rank, path.c_str());
      std::fflush(stdout);
    }

    train(ddp_model, optimizer, worker.device, 3);
    const double difference = examples::max_parameter_difference(*model, *worker.group);
    if (difference != 0.0) {
      std::fprintf(stderr, "rank %d: parameters differ from rank 0's by up to %g after training on\n", rank,
                   difference);
      ok = false;
    } else {
      std::printf("rank %d: parameters identical on all %d ranks after 3 more steps\n", rank, worker.world_size());
    }

    worker.group->barrier();  // nobody reads the file any more
    if (rank == 0) {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
      if (default_path) std::filesystem::remove(path.parent_path(), ignored);  // only when empty
    }
    return ok ? 0 : 1;
  } catch (const std::exception& error) {
    ddprun::record_exception(error);
    std::fprintf(stderr, "demo_checkpoint: %s\n", error.what());
    return 1;
  }
}

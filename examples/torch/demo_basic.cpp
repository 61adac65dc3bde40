/// demo_basic: the first example of PyTorch's "Getting Started with Distributed Data Parallel"
/// tutorial, in C++: the ToyModel (Linear 10->10, ReLU, Linear 10->5) wrapped in
/// ddprun::torch::DistributedDataParallel, MSE loss, SGD at lr 0.001, a few steps on random data
/// (each rank its own), printing every rank's loss. At the end every rank checks that its
/// parameters equal rank 0's bit for bit, and exits 1 when they do not.
///
///   build/bin/ddprun --standalone --nproc-per-node 2 build/bin/demo_basic [--steps 5]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "ddprun/error_report.hpp"
#include "ddprun/torch/ddp.hpp"
#include "parameter_check.hpp"
#include "toy_model.hpp"
#include "worker_setup.hpp"

int main(int argc, char** argv) {
  ddprun::install_error_handlers();
  int steps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: demo_basic [--steps N]   (under ddprun, torchrun, mpirun or srun)\n");
      return 2;
    }
  }
  try {
    torch::set_num_threads(1);
    examples::Worker worker = examples::join_job();
    std::printf("Running basic DDP example on rank %d of %d.\n", worker.rank(), worker.world_size());
    std::fflush(stdout);

    // Each rank seeds differently, so the models start apart: the wrapper broadcasts rank 0's.
    torch::manual_seed(1000 + worker.rank());
    demo::ToyModel model;
    model->to(worker.device);
    ddprun::torch::DistributedDataParallel ddp_model(model, *worker.group);
    torch::optim::SGD optimizer(ddp_model.parameters(), torch::optim::SGDOptions(0.001));

    for (int step = 1; step <= steps; ++step) {
      optimizer.zero_grad();
      torch::Tensor outputs = ddp_model(torch::randn({20, 10}).to(worker.device));
      torch::Tensor labels = torch::randn({20, 5}).to(worker.device);
      torch::Tensor loss = torch::nn::functional::mse_loss(outputs, labels);
      loss.backward();  // returns with the gradients averaged over the ranks
      optimizer.step();
      std::printf("rank %d: step %d loss %.6f\n", worker.rank(), step, loss.item<double>());
      std::fflush(stdout);
    }

    const double difference = examples::max_parameter_difference(*model, *worker.group);
    if (difference != 0.0) {
      std::fprintf(stderr, "rank %d: parameters differ from rank 0's by up to %g after %d steps\n", worker.rank(),
                   difference, steps);
      return 1;
    }
    std::printf("rank %d: parameters identical on all %d ranks after %d steps\n", worker.rank(),
                worker.world_size(), steps);
    return 0;
  } catch (const std::exception& error) {
    ddprun::record_exception(error);
    std::fprintf(stderr, "demo_basic: %s\n", error.what());
    return 1;
  }
}

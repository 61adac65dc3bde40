/// The packaging test's LibTorch trainer: one DistributedDataParallel step of a linear model on CPU
/// tensors (gloo). Alone it is a world of one; prints "torch consumer ok" when the step left the
/// gradients averaged (a world of one: unchanged) and finite.
#include <cstdio>
#include <exception>

#include <torch/torch.h>

#include <ddprun/ddprun.hpp>
#include <ddprun/torch/ddp.hpp>

int main() {
  try {
    ddprun::ProcessGroupOptions options;
    options.backend = ddprun::Backend::gloo;
    auto group = ddprun::ProcessGroup::create(ddprun::identity_from_environment(), options);
    torch::manual_seed(0);
    torch::nn::Linear model(4, 1);
    ddprun::torch::DistributedDataParallel ddp(model, *group);
    torch::optim::SGD optimizer(ddp.parameters(), 0.1);
    optimizer.zero_grad();
    auto loss = torch::mse_loss(ddp(torch::ones({8, 4})), torch::zeros({8, 1}));
    loss.backward();
    const bool ok = model->weight.grad().defined() && torch::isfinite(model->weight.grad()).all().item<bool>();
    optimizer.step();
    std::printf("torch consumer %s: rank %d of %d, loss %g\n", ok ? "ok" : "WRONG", group->rank(), group->size(),
                loss.item<double>());
    return ok ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "torch consumer: %s\n", error.what());
    return 1;
  }
}

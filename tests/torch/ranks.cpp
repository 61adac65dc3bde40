// Forked ranks and the shared ToyModel for ddprun::torch's tests.
#include "ranks.hpp"

#include <chrono>

#include "../support/fork_ranks.hpp"
#include "ddprun/identity.hpp"

namespace ddptest {
namespace {
using namespace std::chrono_literals;
}  // namespace

int run_ranks(int world, const RankBody& body) {
  const int port = free_port();
  return ddprun::testing::count_failed(ddprun::testing::fork_ranks(
      world,
      [&](int rank) {
        ::torch::set_num_threads(1);
        ddprun::Identity identity;
        identity.rank = rank;
        identity.world_size = world;
        identity.local_rank = rank;
        identity.local_world_size = world;
        identity.master_addr = "127.0.0.1";
        identity.master_port = port;
        ddprun::ProcessGroupOptions options;
        options.backend = ddprun::Backend::gloo;
        options.timeout = 60s;
        auto group = ddprun::ProcessGroup::create(identity, options);
        return body(*group) == 0 ? 0 : 1;
      },
      240s));
}

ToyModelImpl::ToyModelImpl() {
  net1 = register_module("net1", ::torch::nn::Linear(10, 10));
  net2 = register_module("net2", ::torch::nn::Linear(10, 5));
}

at::Tensor ToyModelImpl::forward(const at::Tensor& x) { return net2(::torch::relu(net1(x))); }

std::pair<at::Tensor, at::Tensor> toy_batch(int step, std::int64_t batch) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(1000 + step);
  at::Tensor inputs = at::randn({batch, 10}, generator);
  at::Tensor targets = at::randn({batch, 5}, generator);
  return {inputs, targets};
}

at::Tensor flat_parameters(::torch::nn::Module& module) {
  std::vector<at::Tensor> parts;
  for (const auto& parameter : module.parameters()) parts.push_back(parameter.detach().reshape({-1}).to(at::kFloat).cpu());
  return at::cat(parts);
}

int expect_close(const at::Tensor& actual, const at::Tensor& expected, double rtol, double atol, const std::string& what) {
  if (actual.sizes() != expected.sizes()) {
    std::fprintf(stderr, "%s: shapes differ\n", what.c_str());
    return 1;
  }
  at::Tensor bad = ((actual - expected).abs() > expected.abs() * rtol + atol);
  const auto count = bad.sum().item<std::int64_t>();
  if (count > 0) {
    std::fprintf(stderr, "%s: %lld of %lld elements differ, max |diff| %g\n", what.c_str(),
                 static_cast<long long>(count), static_cast<long long>(actual.numel()),
                 (actual - expected).abs().max().item<double>());
  }
  return static_cast<int>(count);
}

}  // namespace ddptest

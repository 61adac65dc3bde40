// Forked ranks and the shared ToyModel for ddprun::torch's tests.
#include "ranks.hpp"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "ddprun/identity.hpp"

namespace ddptest {
namespace {
using namespace std::chrono_literals;
}  // namespace

int run_ranks(int world, const RankBody& body) {
  const int port = free_port();
  std::vector<pid_t> ranks;
  for (int rank = 0; rank < world; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int failures = 1;
      try {
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
        failures = body(*group);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "rank %d: %s\n", rank, error.what());
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(failures == 0 ? 0 : 1);
    }
    ranks.push_back(pid);
  }
  int failed = 0;
  const auto deadline = std::chrono::steady_clock::now() + 240s;
  for (pid_t pid : ranks) {
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed;
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

/// The packaging test's trainer: who am I from the environment, a gloo all_reduce over the world
/// (one process alone, or several under the installed ddprun) and a line through ddprun's logger
/// (whose header includes spdlog's). Prints "consumer ok" per rank and exits 0 only when every rank
/// got the sum of all ranks' contributions.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "ddprun/identity.hpp"
#include "ddprun/logging.hpp"
#include "ddprun/process_group.hpp"

int main() {
  try {
    const ddprun::Identity identity = ddprun::identity_from_environment();
    ddprun::ProcessGroupOptions options;
    options.backend = ddprun::Backend::gloo;
    auto group = ddprun::ProcessGroup::create(identity, options);
    std::vector<double> values{static_cast<double>(group->rank() + 1), 1.0};
    group->all_reduce(ddprun::buffer_of(values.data(), values.size()), ddprun::ReduceOp::sum);
    const int n = group->size();
    const bool ok = values[0] == n * (n + 1) / 2.0 && values[1] == n;
    std::printf("consumer %s: rank %d of %d (launcher %s), all_reduce gave %g %g\n", ok ? "ok" : "WRONG", group->rank(),
                n, std::string(ddprun::launcher_name(identity.launcher)).c_str(), values[0], values[1]);
    ddprun::log().info("consumer: {} ranks, backend {}", n, ddprun::name_of(group->backend()));
    group->barrier();
    return ok ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "consumer: %s\n", error.what());
    return 1;
  }
}

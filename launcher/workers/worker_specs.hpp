#pragma once
/// worker_specs: the WorkerSpec of each local rank of one attempt, as a plain function of the
/// command line, the program and the attempt's place in the job, so that it is tested without
/// processes. The worker group turns each into an environment and a process.
#include <vector>

#include "launcher/cli/launch_config.hpp"
#include "launcher/cli/program.hpp"
#include "launcher/observe/attempt_view.hpp"
#include "launcher/workers/worker_spec.hpp"
#include "rendezvous/endpoint.hpp"

namespace ddprun::launcher {

/// What an attempt's workers are given beyond the command line.
struct AttemptFacts {
  AttemptView place;            ///< their ranks and sizes
  rendezvous::Endpoint master;  ///< MASTER_ADDR:MASTER_PORT, the workers' store
  int restart_count = 0;        ///< TORCHELASTIC_RESTART_COUNT
  WorkerTerminal terminal = WorkerTerminal::pipes;
  /// `--numa-binding`: each local rank's CPUs (empty: not bound); none: no binding at all.
  const std::vector<std::vector<int>>* numa_cpus = nullptr;
  bool libtorch_1 = false;  ///< the program links LibTorch 1.x (WorkerSpec::libtorch_1)
};

/// One spec per local rank (error and progress files, Python hooks and routes are the caller's,
/// made as each worker starts).
std::vector<WorkerSpec> worker_specs(const LaunchConfig& config, const WorkerCommand& command, const AttemptFacts& facts);

}  // namespace ddprun::launcher

#pragma once
/// Joining the job, shared by the LibTorch examples: who am I (from ddprun's, torchrun's, mpirun's
/// or srun's environment), which device this rank trains on, and a process group whose backend
/// fits that device: nccl for CUDA tensors (LibTorch built with CUDA and a GPU present), else gloo.
/// Debian's libtorch-dev is CPU-only, so here it is always the CPU and gloo.
#include <memory>

#include <c10/core/Device.h>
#include <torch/cuda.h>

#include "ddprun/identity.hpp"
#include "ddprun/logging.hpp"
#include "ddprun/process_group.hpp"

namespace examples {

struct Worker {
  ddprun::Identity identity;
  c10::Device device{c10::kCPU};
  std::unique_ptr<ddprun::ProcessGroup> group;

  int rank() const { return group->rank(); }
  int world_size() const { return group->size(); }
  /// TORCHELASTIC_RESTART_COUNT: 0 on the first attempt, n after n restarts of the group.
  int attempt() const { return identity.restart_count; }
};

/// Collective: blocks until every rank joined. Throws ddprun::Error when the environment is
/// inconsistent or a rank did not join within DDPRUN_TIMEOUT_S.
inline Worker join_job() {
  Worker worker;
  worker.identity = ddprun::identity_from_environment();
  ddprun::ProcessGroupOptions options;
  options.backend = ddprun::Backend::gloo;
  if (torch::cuda::is_available()) {
    const int index = worker.identity.local_rank % static_cast<int>(torch::cuda::device_count());
    worker.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
    options.backend = ddprun::Backend::nccl;
    options.cuda_device = index;
  }
  worker.group = ddprun::ProcessGroup::create(worker.identity, options);
  ddprun::configure_logging(worker.group->rank());
  return worker;
}

}  // namespace examples

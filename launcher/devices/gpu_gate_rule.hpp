#pragma once
/// What the GPU gate (gpu_gate.hpp) decides from one sample of the node's GPUs, without I/O, so
/// that it is tested by table: which GPU refuses a start and in which words, and what the wait for
/// a stopped attempt's GPU memory says.
#include <optional>
#include <string>
#include <vector>

#include "launcher/gpu/gpu_state.hpp"

namespace ddprun::launcher {

/// The line that refuses a start: the first GPU (by NVML index) that a worker of `sight` sees and
/// that has a health problem (gpu_state.hpp's health_problem), named by index, UUID and bus id:
/// "GPU 1 (GPU-..., bus 00000000:11:00.0) has fallen off the bus or is inaccessible (NVML:
/// GPU_IS_LOST): no worker started (--gpu-health off starts them anyway)". Nothing: every GPU in
/// sight may be used. `known` fills in a GPU's UUID and bus id that this sample lacks (a GPU that
/// is lost answers nothing) from an earlier sample, by index.
std::optional<std::string> refuse_unhealthy(const std::vector<GpuState>& gpus, const GpuSight& sight,
                                            const std::vector<GpuIdentity>& known = {});

/// "1.5G by pid 4242" / "2.0G by pids 4242, 4243": what `held` holds, for the wait's lines; "an
/// unknown amount" when the driver listed the pids without their memory.
std::string describe_held(const GpuMemoryHeld& held);

}  // namespace ddprun::launcher

#pragma once
/// The state of the machine's GPUs read through NVML (nvml_library.hpp) into GpuState values
/// (gpu_state.hpp), one sample per call. Every call into the driver blocks, and a stalled driver
/// can block for good: run these on a thread of their own, never on the agent's event loop.
#include <vector>

#include "launcher/gpu/gpu_state.hpp"
#include "launcher/gpu/nvml_library.hpp"

namespace ddprun::launcher {

struct GpuReadOptions {
  /// Register each GPU for Xid critical errors (once per library) and report those that arrived
  /// since the previous read. Xids of GPUs not in this read are dropped.
  bool xids = true;
};

/// What a reader keeps between samples of one NVML session (an index names the same GPU until
/// nvmlShutdown): each GPU's identity once read whole, so that a sample asks the driver only for
/// what changes, and a GPU that is lost later is still named by its UUID and bus id.
struct GpuReadMemo {
  std::vector<std::optional<GpuIdentity>> identities;  ///< by NVML index
};

/// One GpuState per NVML index of `indices`, in that order; `nvml` must be initialised. Each field
/// holds its value or the NVML error that left it unknown (NOT_SUPPORTED, NO_PERMISSION, a missing
/// symbol's FUNCTION_NOT_FOUND, ...). GPU_IS_LOST from any call sets `lost` and RESET_REQUIRED
/// `reset_required`; after GPU_IS_LOST the GPU is asked nothing more (the fields left say
/// GPU_IS_LOST). A GPU whose handle cannot be had (NO_PERMISSION, GPU_IS_LOST) has every field
/// unknown with that error and its identity's index alone.
/// With `memo`, identities come from it once known (and a GPU whose handle cannot be had keeps the
/// identity it had).
std::vector<GpuState> read_gpus(NvmlLibrary& nvml, const std::vector<unsigned int>& indices,
                                const GpuReadOptions& options = {}, GpuReadMemo* memo = nullptr);

/// Every GPU NVML counts (nvmlDeviceGetCount_v2, unreadable ones included), by NVML index; the
/// count's error when NVML cannot count.
NvmlResult<std::vector<GpuState>> read_all_gpus(NvmlLibrary& nvml, const GpuReadOptions& options = {},
                                                GpuReadMemo* memo = nullptr);

}  // namespace ddprun::launcher

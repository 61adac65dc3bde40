#pragma once
/// Which GPUs the workers may use, decided without linking CUDA or ROCm: a plain function of what
/// the drivers said (device_probe.hpp) and of the *_VISIBLE_DEVICES variables, read as CUDA and
/// ROCm read them. Only devices that exist count: a list naming GPUs of a machine without a driver
/// names none.
#include <string>
#include <vector>

#include "launcher/devices/device_probe.hpp"
#include "launcher/base/environ.hpp"

namespace ddprun::launcher {

/// The GPUs a worker would see, and how that was decided.
struct VisibleDevices {
  /// What a worker's CUDA_VISIBLE_DEVICES may name, in order: the valid entries of the list
  /// as given, or "0".."n-1" when no list is set.
  std::vector<std::string> names;
  /// One line saying where the count came from, for `-v` and for errors, e.g.
  /// "NVML: 4 GPUs; CUDA_VISIBLE_DEVICES=0,1 selects 2" or
  /// "no NVIDIA driver: libnvidia-ml.so.1 not loadable; CUDA_VISIBLE_DEVICES=0,1,2 lists 3".
  std::string source;
};

/// NVIDIA first: NVML's GPUs (UUIDs known), else the CUDA driver's count (CUDA_VISIBLE_DEVICES
/// already applied by it), else one GPU per /proc/driver/nvidia/gpus entry. Then CUDA_VISIBLE_DEVICES
/// as CUDA reads it: unset = every GPU; empty = none; comma-separated indices, `GPU-<uuid prefix>`
/// (matched against NVML's UUIDs when known) or `MIG-<id>` (taken on trust), ending at the first
/// invalid entry (another form, an index >= the GPU count, an unknown UUID, a repeat).
/// With no NVIDIA GPU, AMD's (the ROCm kernel driver's): ROCR_VISIBLE_DEVICES first, then
/// HIP_VISIBLE_DEVICES, or CUDA_VISIBLE_DEVICES when that is unset, each over what the one
/// before left, read the same way.
VisibleDevices decide_visible_devices(const DeviceFacts& facts, const Environ& env);

/// The CUDA_VISIBLE_DEVICES value of each local rank: worker i gets visible[i*k .. i*k+k-1] joined
/// with ",". `devices_per_worker` 0 (inherit unchanged) gives an empty vector: set nothing.
/// Throws UsageError naming --devices-per-worker, the need (nproc*k) and what is visible when
/// there are too few devices; `source` (VisibleDevices::source) says why.
std::vector<std::string> assign_devices(const std::vector<std::string>& visible, int devices_per_worker,
                                        int nproc_per_node, const std::string& source = "");

/// The check of assign_devices on counts alone, so the command line can fail before anything starts:
/// throws the same UsageError when `visible_count` devices are too few for `nproc_per_node` workers
/// of `devices_per_worker` each (0 needs none).
void require_devices(int devices_per_worker, int nproc_per_node, int visible_count, const std::string& source = "");

}  // namespace ddprun::launcher

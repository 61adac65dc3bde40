#pragma once
/// Which CUDA devices the workers may use, decided without linking CUDA: from CUDA_VISIBLE_DEVICES
/// and the driver's /proc entries, so ddprun builds and runs on machines without the CUDA toolkit.
#include <filesystem>
#include <string>
#include <vector>

#include "environ.hpp"

namespace ddprun::launcher {

/// CUDA devices visible to this process, as the entries a worker's CUDA_VISIBLE_DEVICES may name.
/// CUDA_VISIBLE_DEVICES set: its comma-separated entries (an empty value = none), cut at the first
/// invalid entry like CUDA does (not an index, `GPU-<uuid>` or `MIG-<id>`; a repeated entry; an index
/// >= the number of GPUs when `nvidia_gpus_dir` exists). Unset: "0".."n-1" with n the number of
/// entries of `nvidia_gpus_dir` (one per GPU), 0 when that folder does not exist.
std::vector<std::string> visible_devices(const Environ& env,
                                         const std::filesystem::path& nvidia_gpus_dir = "/proc/driver/nvidia/gpus");

/// The CUDA_VISIBLE_DEVICES value of each local rank: worker i gets visible[i*k .. i*k+k-1] joined
/// with ",". `devices_per_worker` 0 (inherit unchanged) gives an empty vector: set nothing.
/// Throws UsageError naming --devices-per-worker, the need (nproc*k) and what is visible when
/// there are too few devices.
std::vector<std::string> assign_devices(const std::vector<std::string>& visible, int devices_per_worker,
                                        int nproc_per_node);

/// The check of assign_devices on counts alone, so the command line can fail before anything starts:
/// throws the same UsageError when `visible_count` devices are too few for `nproc_per_node` workers
/// of `devices_per_worker` each (0 needs none).
void require_devices(int devices_per_worker, int nproc_per_node, int visible_count);

}  // namespace ddprun::launcher

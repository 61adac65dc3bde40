#pragma once
/// Device discovery: what the machine's drivers say about its GPUs, gathered without linking any
/// of them. The decision of what a worker sees (CUDA_VISIBLE_DEVICES and friends) is devices.hpp's,
/// a plain function of these facts, so that it is tested by table with recorded facts.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::launcher {

/// What each source said. A source that could not answer leaves its count empty and says why.
struct DeviceFacts {
  /// NVML (libnvidia-ml.so.1): every NVIDIA GPU of the machine, by index, as its UUID
  /// ("GPU-..."); NVML ignores CUDA_VISIBLE_DEVICES. Empty when NVML did not answer.
  std::optional<std::vector<std::string>> nvml_uuids;
  std::string nvml_error;  ///< why NVML did not answer, e.g. "libnvidia-ml.so.1 not loadable"
  /// The CUDA driver (libcuda.so.1): cuDeviceGetCount after cuInit, which has applied
  /// CUDA_VISIBLE_DEVICES itself. Asked only when NVML did not answer. A stub library fails cuInit.
  std::optional<int> cuda_count;
  std::string cuda_error;
  /// Entries of /proc/driver/nvidia/gpus (one per GPU the kernel driver holds); empty when absent.
  std::optional<int> proc_nvidia_gpus;
  /// AMD GPUs of the ROCm kernel driver: nodes of /sys/class/kfd/kfd/topology/nodes that are GPUs
  /// (simd_count > 0, gpu_id != 0); empty when that folder is absent.
  std::optional<int> kfd_gpus;
};

/// Where to look. Tests pass a folder of recorded /proc and /sys files and load no library, so that
/// the real code path runs on a machine of any shape.
struct DeviceProbeSettings {
  std::filesystem::path root = "/";  ///< /proc/driver/nvidia/gpus and /sys/class/kfd are read under it
  bool load_libraries = true;        ///< ask NVML, then the CUDA driver
};

/// The settings of this process: DDPRUN_TEST_DEVICE_ROOT=DIR (a test hook) reads recorded files
/// under DIR and loads no driver library; unset: the real machine.
DeviceProbeSettings device_probe_settings(const std::optional<std::string>& test_root);

/// Asks every source. The libraries are loaded in a short-lived child process, so ddprun never
/// holds a driver's threads, memory or file descriptors (and a hung driver costs at most 20 s);
/// may take a while where the driver initialises its GPUs (no persistence mode), so call it only
/// when a count is needed. It forks: call it while the process has one thread (ddprun plans the
/// job before its agent starts any).
DeviceFacts probe_devices(const DeviceProbeSettings& settings);

}  // namespace ddprun::launcher

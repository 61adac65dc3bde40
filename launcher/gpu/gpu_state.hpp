#pragma once
/// One GPU's state as NVML reported it at one sample, and the decisions made from it: is the GPU
/// healthy enough to start workers on, which GPUs a worker sees, how much GPU memory a set of
/// processes still holds. Plain values and functions, no I/O: gpu_reader.hpp fills GpuState through
/// NVML, and the tests fill it by hand.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::launcher {

/// One reading of a GPU: the value, or, when NVML gave none, its error code. A field NVML does not
/// support on this GPU (NOT_SUPPORTED: GeForce boards, ECC off, MIG) or will not tell this user
/// (NO_PERMISSION) stays unknown: never 0, so that nothing mistakes "cannot say" for "none".
template <typename T>
struct GpuField {
  std::optional<T> value;
  int error = 0;  ///< the nvmlReturn_t that left it unknown; 0 when known (or never asked)
  bool known() const { return value.has_value(); }
};

/// What names a GPU: NVML's index and the identities that outlive an index.
struct GpuIdentity {
  unsigned int index = 0;  ///< NVML's index (not CUDA's)
  std::string uuid;        ///< "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"; empty when NVML did not say
  std::string bus_id;      ///< NVML's "00000000:3B:00.0"; empty when NVML did not say
  std::string name;        ///< "NVIDIA H100 80GB HBM3"; empty when NVML did not say
  /// PCI domain, bus and device: CUDA's PCI_BUS_ID order. Nothing when NVML did not say.
  std::optional<std::uint64_t> pci_order;
};

/// GpuIdentity::pci_order of a PCI address: ascending keys are ascending (domain, bus, device).
std::uint64_t pci_order_key(unsigned int domain, unsigned int bus, unsigned int device);

struct GpuMemory {
  std::uint64_t used_bytes = 0;
  std::uint64_t total_bytes = 0;
};

/// A process with a CUDA context on the GPU.
struct GpuProcess {
  pid_t pid = 0;  ///< the host's pid (the driver knows no pid namespaces)
  std::optional<std::uint64_t> bytes;  ///< its GPU memory; nothing when the driver cannot say
};

struct GpuState {
  GpuIdentity identity;
  GpuField<unsigned int> utilisation_percent;  ///< of time a kernel ran, over the driver's last period
  GpuField<GpuMemory> memory;
  GpuField<std::vector<GpuProcess>> processes;  ///< compute processes only (graphics are not listed)
  GpuField<unsigned int> temperature_c;
  GpuField<double> power_watts;
  GpuField<std::uint64_t> throttle_reasons;  ///< nvml::clock_reason bits
  GpuField<std::uint64_t> uncorrectable_ecc_errors;  ///< volatile: since the driver loaded
  GpuField<bool> retired_pages_pending;
  GpuField<bool> remapped_rows_pending;
  bool lost = false;            ///< NVML said GPU_IS_LOST: fallen off the bus or inaccessible
  bool reset_required = false;  ///< NVML said RESET_REQUIRED
  /// Xid critical errors reported since the previous sample, in arrival order.
  GpuField<std::vector<unsigned long long>> xids;
};

/// The throttle reasons that slow a job and that a user can act on, in bit order:
/// "SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown".
/// Idle, sync boost, application and display clock settings are not named.
std::vector<std::string> throttle_reason_names(std::uint64_t reasons);

/// Why workers must not start on this GPU, or nothing when it may be used. In order: lost, needs a
/// reset, retired pages pending, uncorrectable ECC errors, row remapping pending. A field that is
/// unknown is no reason: a GPU without ECC is not unhealthy.
std::optional<std::string> health_problem(const GpuState& gpu);

/// A GPU by every name it has: "GPU 2 (GPU-8932f937-..., bus 00000000:3B:00.0)", with "uuid
/// unknown" / "bus unknown" for what NVML did not say.
std::string describe_gpu(unsigned int index, const std::string& uuid, const std::string& bus_id);

/// The line for an unhealthy GPU: describe_gpu's names, then the reason.
std::string describe_unhealthy_gpu(const GpuState& gpu, const std::string& reason);

/// The GPUs one worker sees, as NVML indices, in the worker's own order (its cuda:0 first).
struct VisibleGpus {
  std::vector<unsigned int> nvml_indices;
  /// Integer entries (or an unset list) were mapped in PCI bus order without CUDA_DEVICE_ORDER=
  /// PCI_BUS_ID: CUDA's default order (FASTEST_FIRST) is the same only where every GPU is the same
  /// model, which nothing here can check for certain.
  bool pci_order_assumed = false;
  /// The first entry that was not mapped (invalid, unknown, repeated, or a MIG id, which is not
  /// mapped to its GPU); the list stops there, as CUDA's does. Nothing when all were mapped.
  std::optional<std::string> stopped_at;
};

/// The NVML devices a process with these CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER values sees.
/// Unset: every device; empty: none. Entries are read as CUDA reads them (devices.hpp):
/// comma-separated, trimmed; an integer is an index in CUDA's order, here PCI bus order of
/// `nvml_devices` (a device whose address is unknown after those whose address is known, by NVML
/// index); `GPU-<prefix>` is the one device whose UUID starts with it; the list ends at the
/// first entry that is none of these, names no device, names several, or repeats one.
VisibleGpus visible_gpus(const std::optional<std::string>& cuda_visible_devices,
                         const std::optional<std::string>& cuda_device_order,
                         const std::vector<GpuIdentity>& nvml_devices);

/// Which GPUs each worker of a node sees: its CUDA_VISIBLE_DEVICES by local rank (nothing: unset,
/// every GPU) and the job's CUDA_DEVICE_ORDER, read as CUDA reads them (visible_gpus).
struct GpuSight {
  std::vector<std::optional<std::string>> cuda_visible_devices;
  std::optional<std::string> cuda_device_order;
};

/// The NVML indices some worker of `sight` sees (each once, ascending). A worker whose list could
/// not be mapped whole (VisibleGpus::stopped_at) may see a GPU NVML cannot name (no UUID: lost, or
/// not to be opened): those are counted in sight too, so that a check never passes a GPU it
/// cannot rule out.
std::vector<unsigned int> gpus_in_sight(const GpuSight& sight, const std::vector<GpuIdentity>& nvml_devices);

/// The GPU memory `pids` hold on `gpus`, for the wait before a restart.
struct GpuMemoryHeld {
  std::uint64_t bytes = 0;  ///< the sum of what the driver reported for them (unknown amounts add 0)
  std::vector<pid_t> pids;  ///< each pid of `pids` listed on any GPU, ascending, once
  /// Some GPU could not list its processes: `pids` may hold memory there that is not counted.
  bool incomplete = false;
};

/// A pid listed on a GPU holds memory there, whatever amount the driver reports with it (a context
/// costs memory even when the driver cannot say how much).
GpuMemoryHeld memory_held_by(const std::vector<GpuState>& gpus, const std::vector<pid_t>& pids);

}  // namespace ddprun::launcher

#pragma once
/// NVML (libnvidia-ml.so.1) loaded into this process with dlopen: its symbols resolved once, its
/// calls as typed methods whose answers are values or NVML's error code. The device count is asked
/// in a child process (device_probe.hpp); this is for the GPU state that is read again and again
/// (gpu_reader.hpp), where a process per sample would cost too much.
///
/// Every method blocks for as long as the driver takes, and a hung driver can take forever (a
/// thread in D state; 45 s per call on GSP timeouts: go-nvml #152, open-gpu-kernel-modules #446):
/// call them on a thread of their own, never on the agent's event loop. NVML itself is
/// thread-safe, but one NvmlLibrary is meant for one thread at a time (its event set and
/// registrations are not guarded).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "launcher/gpu/nvml_abi.hpp"

namespace ddprun::launcher {

/// One call's outcome when it failed: NVML's code, nvml_error_name's word and the library's own
/// text (nvmlErrorString). code 0 is success.
struct NvmlStatus {
  int code = nvml::code::kSuccess;
  std::string text;  ///< empty on success
  bool ok() const { return code == nvml::code::kSuccess; }
};

/// A value, or the status that says why there is none.
template <typename T>
struct NvmlResult {
  std::optional<T> value;
  NvmlStatus status;
  bool ok() const { return value.has_value(); }
};

/// nvmlDeviceGetRemappedRows' four answers.
struct NvmlRemappedRows {
  unsigned int corrected = 0;
  unsigned int uncorrected = 0;
  bool pending = false;  ///< a reset is needed to remap rows already marked
  bool failed = false;   ///< a remapping failed at some time in the past
};

/// One Xid from the event set: which GPU (the handle other calls take) and the Xid number.
struct NvmlXid {
  nvml::Device device;
  unsigned long long xid = 0;
};

/// The NVML call a thread is inside, for another thread to read (gpu_sampler.hpp names a stalled
/// call with it): set before each call into the driver, cleared after it returns.
struct NvmlCallMarker {
  std::atomic<const char*> call{nullptr};  ///< the exported function's name (a literal); null between calls
  std::atomic<std::int64_t> since_ns{0};   ///< steady_clock time at which that call began

  void enter(const char* name) {
    since_ns.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    call.store(name, std::memory_order_release);
  }
  void leave() { call.store(nullptr, std::memory_order_release); }
};

/// The file dlopen opens: DDPRUN_NVML_LIBRARY's value when set and not empty (a driver installed
/// outside the loader's path, or the tests' stand-in), else "libnvidia-ml.so.1".
std::string nvml_library_path(const std::optional<std::string>& setting);

class NvmlLibrary {
 public:
  /// dlopen(path, RTLD_NOW | RTLD_LOCAL) and every symbol resolved. Fails with LIBRARY_NOT_FOUND
  /// (dlerror's text) when the file cannot be loaded, FUNCTION_NOT_FOUND naming the first required
  /// symbol it lacks (nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlDeviceGetCount_v2,
  /// nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetUUID, nvmlDeviceGetPciInfo_v3). Every other symbol
  /// may be missing (an older driver): its method then answers FUNCTION_NOT_FOUND.
  /// Does not call nvmlInit_v2.
  static NvmlResult<std::unique_ptr<NvmlLibrary>> load(const std::string& path);

  /// Calls nvmlShutdown when init() succeeded and shutdown() was not called, and frees the event
  /// set. The library stays mapped (no dlclose): a driver's threads may still run in it.
  /// Destroy it only when no call is in flight; a thread stuck in a call leaks it instead.
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  /// nvmlInit_v2: NVML's session, ref-counted by the library (each success needs a shutdown).
  /// Touches no GPU: the first handle of each GPU initialises it (seconds without persistence mode).
  NvmlStatus init();
  /// Frees the Xid event set, then nvmlShutdown. No-op when not initialised.
  NvmlStatus shutdown();

  NvmlResult<unsigned int> device_count();                  ///< nvmlDeviceGetCount_v2: every GPU, openable or not
  NvmlResult<nvml::Device> device(unsigned int index);      ///< nvmlDeviceGetHandleByIndex_v2 (NVML's index, not CUDA's)
  NvmlResult<std::string> uuid(nvml::Device device);        ///< "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
  NvmlResult<std::string> name(nvml::Device device);        ///< "NVIDIA H100 80GB HBM3"
  NvmlResult<nvml::PciInfo> pci_info(nvml::Device device);  ///< busId is "00000000:3B:00.0"
  NvmlResult<nvml::Utilization> utilization(nvml::Device device);
  NvmlResult<nvml::Memory> memory(nvml::Device device);     ///< nvmlDeviceGetMemoryInfo
  /// nvmlDeviceGetComputeRunningProcesses_v3 with its INSUFFICIENT_SIZE protocol: a first call for
  /// the count, then a buffer of twice that plus 5 (room for processes that start meanwhile), asked
  /// again while the answer is INSUFFICIENT_SIZE; at most 4 calls and 4096 entries, after which
  /// the last INSUFFICIENT_SIZE is the answer. Entries are read at the stride the driver writes
  /// (process_info_size()).
  NvmlResult<std::vector<nvml::ProcessInfo>> compute_processes(nvml::Device device);
  NvmlResult<unsigned int> temperature_c(nvml::Device device);     ///< the GPU die's sensor
  NvmlResult<unsigned int> power_milliwatts(nvml::Device device);  ///< nvmlDeviceGetPowerUsage
  /// nvmlDeviceGetCurrentClocksEventReasons, or ...ThrottleReasons on drivers before R535 (same
  /// prototype, same bits: nvml::clock_reason).
  NvmlResult<std::uint64_t> clock_event_reasons(nvml::Device device);
  /// nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE): since the driver loaded.
  NvmlResult<std::uint64_t> uncorrected_ecc_errors(nvml::Device device);
  NvmlResult<bool> retired_pages_pending(nvml::Device device);  ///< nvmlDeviceGetRetiredPagesPendingStatus
  NvmlResult<NvmlRemappedRows> remapped_rows(nvml::Device device);  ///< nvmlDeviceGetRemappedRows (v1)

  /// Registers `device` for Xid critical errors in this library's event set (nvmlEventSetCreate
  /// on first use, nvmlDeviceRegisterEvents). A device already registered answers success at once.
  /// Xids that happened before registration are not reported (NVML's rule). NOT_SUPPORTED leaves
  /// the set usable for other devices.
  NvmlStatus watch_xids(nvml::Device device);
  /// The Xids that arrived since the last call: nvmlEventSetWait_v2 with timeout 0 until it says
  /// TIMEOUT (nothing pending), at most 64 events per call (the rest wait for the next). Success
  /// with none when no device is watched.
  NvmlResult<std::vector<NvmlXid>> take_xids();

  /// The stride of compute_processes' entries: 24 (nvml.h), or 32 where the exported symbols say
  /// the driver is an early R535 (nvitop's test: _v3 and nvmlDeviceGetConfComputeMemSizeInfo
  /// exported, nvmlDeviceGetRunningProcessDetailList not).
  std::size_t process_info_size() const;

  /// Every call into the driver from now on names itself on `marker` while it runs (nothing when
  /// null). The marker must outlive every call.
  void set_call_marker(NvmlCallMarker* marker) { marker_ = marker; }

  /// The status of `code`: "GPU_IS_LOST: " and nvmlErrorString's text; empty for success.
  NvmlStatus describe(int code) const;

  struct Symbols;  // the resolved functions (nvml_library.cpp)

 private:
  NvmlLibrary(void* handle, std::unique_ptr<Symbols> symbols);
  /// `value` when `rc` is success, else describe(rc).
  template <typename T>
  NvmlResult<T> answer(int rc, T value) const;
  static NvmlStatus missing(const char* symbol);

  void* handle_;
  std::unique_ptr<Symbols> fn_;
  bool initialized_ = false;
  std::optional<nvml::EventSet> events_;
  std::set<void*> watched_;  ///< device handles registered in events_
  NvmlCallMarker* marker_ = nullptr;
};

}  // namespace ddprun::launcher

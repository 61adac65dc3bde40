#pragma once
/// NVML's binary interface as ddprun calls it through dlsym: the layouts, codes and bit values of
/// nvml.h (API version 13, the same in 12.x for everything here), written out so that ddprun builds
/// without the CUDA toolkit. Sizes are those of nvml.h compiled for x86-64 and aarch64 Linux (LP64);
/// the asserts keep a typo from becoming a driver writing past a buffer.
/// Source of every value: nvml.h of NVML API 13 (CUDA 13), as NVIDIA/go-nvml vendors it; the layouts
/// are unchanged since CUDA 12.0.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddprun::launcher::nvml {

// ---- handles: a struct holding one pointer, passed by value --------------------------------------

struct Device {  ///< nvmlDevice_t
  void* handle = nullptr;
  friend bool operator==(const Device&, const Device&) = default;
};
struct EventSet {  ///< nvmlEventSet_t
  void* handle = nullptr;
};

// ---- structs ------------------------------------------------------------------------------------

struct PciInfo {  ///< nvmlPciInfo_t, filled by nvmlDeviceGetPciInfo_v3
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  ///< "%08X:%02X:%02X.0", e.g. "00000000:3B:00.0"
};
static_assert(sizeof(PciInfo) == 68 && offsetof(PciInfo, busId) == 36);

struct Utilization {  ///< nvmlUtilization_t, percent over the driver's last sample period
  unsigned int gpu;
  unsigned int memory;
};
static_assert(sizeof(Utilization) == 8);

struct Memory {  ///< nvmlMemory_t, bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
static_assert(sizeof(Memory) == 24);

/// nvmlProcessInfo_t (= nvmlProcessInfo_v2_t), the entries of nvmlDeviceGetComputeRunningProcesses_v3.
struct ProcessInfo {
  unsigned int pid;                 ///< a host pid: the driver knows no pid namespaces
  unsigned long long usedGpuMemory; ///< bytes; kValueNotAvailable when the driver cannot say
  unsigned int gpuInstanceId;       ///< 0xFFFFFFFF when MIG is off
  unsigned int computeInstanceId;
};
static_assert(sizeof(ProcessInfo) == 24 && offsetof(ProcessInfo, usedGpuMemory) == 8);

/// Drivers 535.43.02 to 535.86.x wrote 32-byte entries from the same call (an extra
/// usedGpuCcProtectedMemory at offset 24, no version bump; nvitop PR #89).
constexpr std::size_t kProcessInfoSize = 24;
constexpr std::size_t kProcessInfoSizeR535Early = 32;

struct EventData {  ///< nvmlEventData_t, filled by nvmlEventSetWait_v2
  Device device;
  unsigned long long eventType;
  unsigned long long eventData;  ///< the Xid for an XidCriticalError event (999: unknown Xid)
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(EventData) == 32 && offsetof(EventData, eventData) == 16);

// ---- values --------------------------------------------------------------------------------------

constexpr unsigned long long kValueNotAvailable = ~0ULL;  ///< NVML_VALUE_NOT_AVAILABLE in a ULL field
constexpr unsigned int kUuidBufferSize = 96;              ///< NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned int kNameBufferSize = 96;              ///< NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr int kTemperatureGpu = 0;                        ///< NVML_TEMPERATURE_GPU
constexpr int kMemoryErrorUncorrected = 1;                ///< NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;                           ///< NVML_VOLATILE_ECC: since the driver loaded
constexpr unsigned long long kEventXidCriticalError = 0x8;

/// nvmlClocksEventReason* (alias nvmlClocksThrottleReason*) bits.
namespace clock_reason {
constexpr std::uint64_t kGpuIdle = 0x1;
constexpr std::uint64_t kSwPowerCap = 0x4;
constexpr std::uint64_t kHwSlowdown = 0x8;
constexpr std::uint64_t kSyncBoost = 0x10;
constexpr std::uint64_t kSwThermalSlowdown = 0x20;
constexpr std::uint64_t kHwThermalSlowdown = 0x40;
constexpr std::uint64_t kHwPowerBrakeSlowdown = 0x80;
}  // namespace clock_reason

/// nvmlReturn_t values ddprun acts on (the full list is nvml_error_name's).
namespace code {
constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNoPermission = 4;
constexpr int kNotFound = 6;
constexpr int kInsufficientSize = 7;
constexpr int kTimeout = 10;
constexpr int kLibraryNotFound = 12;   ///< never from the library: ddprun's, when dlopen fails
constexpr int kFunctionNotFound = 13;  ///< never from the library: ddprun's, when dlsym finds nothing
constexpr int kGpuIsLost = 15;
constexpr int kResetRequired = 16;
constexpr int kUnknown = 999;
}  // namespace code

}  // namespace ddprun::launcher::nvml

namespace ddprun::launcher {

/// The name of an nvmlReturn_t without the NVML_/NVML_ERROR_ prefix: 15 -> "GPU_IS_LOST",
/// 0 -> "SUCCESS"; a code nvml.h (API 13) does not define -> "error N". Words for lines and
/// JSON that do not depend on the driver's own texts (nvmlErrorString), which vary by version.
std::string nvml_error_name(int code);

}  // namespace ddprun::launcher

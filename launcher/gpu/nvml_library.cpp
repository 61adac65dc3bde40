#include "launcher/gpu/nvml_library.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

namespace ddprun::launcher {

using nvml::Device;
using nvml::EventSet;
using Ull = unsigned long long;

/// Every function NvmlLibrary calls, with nvml.h's prototypes (API 13). nvmlReturn_t and
/// the enums are 4-byte ints; the handles are one-pointer structs passed by value.
struct NvmlLibrary::Symbols {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*get_count)(unsigned int*) = nullptr;
  int (*get_handle)(unsigned int, Device*) = nullptr;
  int (*get_uuid)(Device, char*, unsigned int) = nullptr;
  int (*get_pci_info)(Device, nvml::PciInfo*) = nullptr;
  // optional
  int (*get_name)(Device, char*, unsigned int) = nullptr;
  int (*get_utilization)(Device, nvml::Utilization*) = nullptr;
  int (*get_memory)(Device, nvml::Memory*) = nullptr;
  int (*get_processes)(Device, unsigned int*, void*) = nullptr;
  int (*get_temperature)(Device, int, unsigned int*) = nullptr;
  int (*get_power)(Device, unsigned int*) = nullptr;
  int (*get_clock_reasons)(Device, Ull*) = nullptr;
  int (*get_ecc)(Device, int, int, Ull*) = nullptr;
  int (*get_retired_pending)(Device, int*) = nullptr;
  int (*get_remapped_rows)(Device, unsigned int*, unsigned int*, unsigned int*, unsigned int*) = nullptr;
  int (*event_set_create)(EventSet*) = nullptr;
  int (*register_events)(Device, Ull, EventSet) = nullptr;
  int (*event_set_wait)(EventSet, nvml::EventData*, unsigned int) = nullptr;
  int (*event_set_free)(EventSet) = nullptr;
  std::size_t process_info_size = nvml::kProcessInfoSize;
};

namespace {

constexpr unsigned int kMaxProcessCalls = 4;
constexpr unsigned int kMaxProcesses = 4096;
constexpr int kMaxXidsPerTake = 64;

template <typename F>
void resolve(void* library, const char* name, F& target) {
  target = reinterpret_cast<F>(::dlsym(library, name));
}

/// Names the call on the marker (when there is one) for as long as it runs.
class CallMark {
 public:
  CallMark(NvmlCallMarker* marker, const char* call) : marker_(marker) {
    if (marker_ != nullptr) marker_->enter(call);
  }
  ~CallMark() {
    if (marker_ != nullptr) marker_->leave();
  }
  CallMark(const CallMark&) = delete;
  CallMark& operator=(const CallMark&) = delete;

 private:
  NvmlCallMarker* marker_;
};

/// A NUL-terminated string from a fixed buffer the library may have filled to the last byte.
std::string from_buffer(const char* buffer, std::size_t size) { return std::string(buffer, ::strnlen(buffer, size)); }

}  // namespace

std::string nvml_library_path(const std::optional<std::string>& setting) {
  if (setting && !setting->empty()) return *setting;
  return "libnvidia-ml.so.1";
}

NvmlResult<std::unique_ptr<NvmlLibrary>> NvmlLibrary::load(const std::string& path) {
  ::dlerror();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return {std::nullopt, NvmlStatus{nvml::code::kLibraryNotFound,
                                     "LIBRARY_NOT_FOUND: " + (why != nullptr ? std::string(why) : path + " not loadable")}};
  }
  auto fn = std::make_unique<Symbols>();
  const struct {
    const char* name;
    bool present;
  } required[] = {
      {"nvmlInit_v2", (resolve(handle, "nvmlInit_v2", fn->init), fn->init != nullptr)},
      {"nvmlShutdown", (resolve(handle, "nvmlShutdown", fn->shutdown), fn->shutdown != nullptr)},
      {"nvmlErrorString", (resolve(handle, "nvmlErrorString", fn->error_string), fn->error_string != nullptr)},
      {"nvmlDeviceGetCount_v2", (resolve(handle, "nvmlDeviceGetCount_v2", fn->get_count), fn->get_count != nullptr)},
      {"nvmlDeviceGetHandleByIndex_v2",
       (resolve(handle, "nvmlDeviceGetHandleByIndex_v2", fn->get_handle), fn->get_handle != nullptr)},
      {"nvmlDeviceGetUUID", (resolve(handle, "nvmlDeviceGetUUID", fn->get_uuid), fn->get_uuid != nullptr)},
      {"nvmlDeviceGetPciInfo_v3", (resolve(handle, "nvmlDeviceGetPciInfo_v3", fn->get_pci_info), fn->get_pci_info != nullptr)},
  };
  for (const auto& symbol : required) {
    if (!symbol.present) {
      // Not dlclosed: a library that ran constructors may have started threads.
      return {std::nullopt, NvmlStatus{nvml::code::kFunctionNotFound,
                                       "FUNCTION_NOT_FOUND: " + path + " has no " + symbol.name}};
    }
  }
  resolve(handle, "nvmlDeviceGetName", fn->get_name);
  resolve(handle, "nvmlDeviceGetUtilizationRates", fn->get_utilization);
  resolve(handle, "nvmlDeviceGetMemoryInfo", fn->get_memory);
  resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3", fn->get_processes);
  resolve(handle, "nvmlDeviceGetTemperature", fn->get_temperature);
  resolve(handle, "nvmlDeviceGetPowerUsage", fn->get_power);
  resolve(handle, "nvmlDeviceGetCurrentClocksEventReasons", fn->get_clock_reasons);
  if (fn->get_clock_reasons == nullptr) resolve(handle, "nvmlDeviceGetCurrentClocksThrottleReasons", fn->get_clock_reasons);
  resolve(handle, "nvmlDeviceGetTotalEccErrors", fn->get_ecc);
  resolve(handle, "nvmlDeviceGetRetiredPagesPendingStatus", fn->get_retired_pending);
  resolve(handle, "nvmlDeviceGetRemappedRows", fn->get_remapped_rows);
  resolve(handle, "nvmlEventSetCreate", fn->event_set_create);
  resolve(handle, "nvmlDeviceRegisterEvents", fn->register_events);
  resolve(handle, "nvmlEventSetWait_v2", fn->event_set_wait);
  resolve(handle, "nvmlEventSetFree", fn->event_set_free);
  if (fn->get_processes != nullptr && ::dlsym(handle, "nvmlDeviceGetConfComputeMemSizeInfo") != nullptr &&
      ::dlsym(handle, "nvmlDeviceGetRunningProcessDetailList") == nullptr) {
    fn->process_info_size = nvml::kProcessInfoSizeR535Early;
  }
  return {std::unique_ptr<NvmlLibrary>(new NvmlLibrary(handle, std::move(fn))), {}};
}

NvmlLibrary::NvmlLibrary(void* handle, std::unique_ptr<Symbols> symbols) : handle_(handle), fn_(std::move(symbols)) {}

NvmlLibrary::~NvmlLibrary() { shutdown(); }

NvmlStatus NvmlLibrary::describe(int code) const {
  if (code == nvml::code::kSuccess) return {};
  const char* text = fn_->error_string(code);
  std::string line = nvml_error_name(code);
  if (text != nullptr && *text != '\0') line += std::string(": ") + text;
  return {code, std::move(line)};
}

NvmlStatus NvmlLibrary::missing(const char* symbol) {
  return {nvml::code::kFunctionNotFound, std::string("FUNCTION_NOT_FOUND: the NVIDIA driver's NVML has no ") + symbol};
}

NvmlStatus NvmlLibrary::init() {
  const CallMark mark(marker_, "nvmlInit_v2");
  NvmlStatus result = describe(fn_->init());
  if (result.ok()) initialized_ = true;
  return result;
}

NvmlStatus NvmlLibrary::shutdown() {
  if (!initialized_) return {};
  const CallMark mark(marker_, "nvmlShutdown");
  if (events_ && fn_->event_set_free != nullptr) fn_->event_set_free(*events_);
  events_.reset();
  watched_.clear();
  initialized_ = false;
  return describe(fn_->shutdown());
}

template <typename T>
NvmlResult<T> NvmlLibrary::answer(int rc, T value) const {
  if (rc != nvml::code::kSuccess) return {std::nullopt, describe(rc)};
  return {std::move(value), {}};
}

std::size_t NvmlLibrary::process_info_size() const { return fn_->process_info_size; }

NvmlResult<unsigned int> NvmlLibrary::device_count() {
  unsigned int count = 0;
  const CallMark mark(marker_, "nvmlDeviceGetCount_v2");
  int rc = fn_->get_count(&count);
  return answer(rc, count);
}

NvmlResult<Device> NvmlLibrary::device(unsigned int index) {
  Device device{};
  const CallMark mark(marker_, "nvmlDeviceGetHandleByIndex_v2");
  int rc = fn_->get_handle(index, &device);
  return answer(rc, device);
}

NvmlResult<std::string> NvmlLibrary::uuid(Device device) {
  char buffer[nvml::kUuidBufferSize] = {};
  const CallMark mark(marker_, "nvmlDeviceGetUUID");
  if (int rc = fn_->get_uuid(device, buffer, sizeof buffer); rc != nvml::code::kSuccess) return {std::nullopt, describe(rc)};
  return {from_buffer(buffer, sizeof buffer), {}};
}

NvmlResult<std::string> NvmlLibrary::name(Device device) {
  if (fn_->get_name == nullptr) return {std::nullopt, missing("nvmlDeviceGetName")};
  char buffer[nvml::kNameBufferSize] = {};
  const CallMark mark(marker_, "nvmlDeviceGetName");
  if (int rc = fn_->get_name(device, buffer, sizeof buffer); rc != nvml::code::kSuccess) return {std::nullopt, describe(rc)};
  return {from_buffer(buffer, sizeof buffer), {}};
}

NvmlResult<nvml::PciInfo> NvmlLibrary::pci_info(Device device) {
  nvml::PciInfo out{};
  const CallMark mark(marker_, "nvmlDeviceGetPciInfo_v3");
  int rc = fn_->get_pci_info(device, &out);
  return answer(rc, out);
}

NvmlResult<nvml::Utilization> NvmlLibrary::utilization(Device device) {
  if (fn_->get_utilization == nullptr) return {std::nullopt, missing("nvmlDeviceGetUtilizationRates")};
  nvml::Utilization out{};
  const CallMark mark(marker_, "nvmlDeviceGetUtilizationRates");
  int rc = fn_->get_utilization(device, &out);
  return answer(rc, out);
}

NvmlResult<nvml::Memory> NvmlLibrary::memory(Device device) {
  if (fn_->get_memory == nullptr) return {std::nullopt, missing("nvmlDeviceGetMemoryInfo")};
  nvml::Memory out{};
  const CallMark mark(marker_, "nvmlDeviceGetMemoryInfo");
  int rc = fn_->get_memory(device, &out);
  return answer(rc, out);
}

NvmlResult<std::vector<nvml::ProcessInfo>> NvmlLibrary::compute_processes(Device device) {
  if (fn_->get_processes == nullptr) return {std::nullopt, missing("nvmlDeviceGetComputeRunningProcesses_v3")};
  const std::size_t stride = fn_->process_info_size;
  unsigned int count = 0;
  const CallMark mark(marker_, "nvmlDeviceGetComputeRunningProcesses_v3");
  int rc = fn_->get_processes(device, &count, nullptr);  // "call this function with *infoCount = 0"
  std::vector<unsigned char> buffer;
  for (unsigned int calls = 1; rc == nvml::code::kInsufficientSize && calls < kMaxProcessCalls; ++calls) {
    // The driver said how many it needs; processes may start before the next call.
    const unsigned int capacity = std::min<unsigned long long>(2ULL * count + 5, kMaxProcesses);
    // Room for the widest stride a driver has written, so that a 535.43-535.86 driver cannot write
    // past the end whatever process_info_size() guessed.
    buffer.assign(static_cast<std::size_t>(capacity) * nvml::kProcessInfoSizeR535Early, 0);
    count = capacity;
    rc = fn_->get_processes(device, &count, buffer.data());
    // More than the bound, or a driver asking for no more than it was given: asking again cannot help.
    if (rc == nvml::code::kInsufficientSize && (capacity == kMaxProcesses || count <= capacity)) break;
  }
  if (rc != nvml::code::kSuccess) return {std::nullopt, describe(rc)};
  std::vector<nvml::ProcessInfo> processes;
  const std::size_t entries = buffer.empty() ? 0 : std::min<std::size_t>(count, buffer.size() / stride);
  processes.reserve(entries);
  for (std::size_t i = 0; i < entries; ++i) {
    nvml::ProcessInfo entry{};
    std::memcpy(&entry, buffer.data() + i * stride, sizeof entry);
    processes.push_back(entry);
  }
  return {std::move(processes), {}};
}

NvmlResult<unsigned int> NvmlLibrary::temperature_c(Device device) {
  if (fn_->get_temperature == nullptr) return {std::nullopt, missing("nvmlDeviceGetTemperature")};
  unsigned int celsius = 0;
  const CallMark mark(marker_, "nvmlDeviceGetTemperature");
  int rc = fn_->get_temperature(device, nvml::kTemperatureGpu, &celsius);
  return answer(rc, celsius);
}

NvmlResult<unsigned int> NvmlLibrary::power_milliwatts(Device device) {
  if (fn_->get_power == nullptr) return {std::nullopt, missing("nvmlDeviceGetPowerUsage")};
  unsigned int milliwatts = 0;
  const CallMark mark(marker_, "nvmlDeviceGetPowerUsage");
  int rc = fn_->get_power(device, &milliwatts);
  return answer(rc, milliwatts);
}

NvmlResult<std::uint64_t> NvmlLibrary::clock_event_reasons(Device device) {
  if (fn_->get_clock_reasons == nullptr) return {std::nullopt, missing("nvmlDeviceGetCurrentClocksEventReasons")};
  Ull reasons = 0;
  const CallMark mark(marker_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (int rc = fn_->get_clock_reasons(device, &reasons); rc != nvml::code::kSuccess) return {std::nullopt, describe(rc)};
  return {static_cast<std::uint64_t>(reasons), {}};
}

NvmlResult<std::uint64_t> NvmlLibrary::uncorrected_ecc_errors(Device device) {
  if (fn_->get_ecc == nullptr) return {std::nullopt, missing("nvmlDeviceGetTotalEccErrors")};
  Ull errors = 0;
  const CallMark mark(marker_, "nvmlDeviceGetTotalEccErrors");
  int rc = fn_->get_ecc(device, nvml::kMemoryErrorUncorrected, nvml::kVolatileEcc, &errors);
  if (rc != nvml::code::kSuccess) return {std::nullopt, describe(rc)};
  return {static_cast<std::uint64_t>(errors), {}};
}

NvmlResult<bool> NvmlLibrary::retired_pages_pending(Device device) {
  if (fn_->get_retired_pending == nullptr) return {std::nullopt, missing("nvmlDeviceGetRetiredPagesPendingStatus")};
  int pending = 0;  // nvmlEnableState_t
  const CallMark mark(marker_, "nvmlDeviceGetRetiredPagesPendingStatus");
  if (int rc = fn_->get_retired_pending(device, &pending); rc != nvml::code::kSuccess) return {std::nullopt, describe(rc)};
  return {pending != 0, {}};
}

NvmlResult<NvmlRemappedRows> NvmlLibrary::remapped_rows(Device device) {
  if (fn_->get_remapped_rows == nullptr) return {std::nullopt, missing("nvmlDeviceGetRemappedRows")};
  unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
  const CallMark mark(marker_, "nvmlDeviceGetRemappedRows");
  int rc = fn_->get_remapped_rows(device, &corrected, &uncorrected, &pending, &failed);
  if (rc != nvml::code::kSuccess) return {std::nullopt, describe(rc)};
  return {NvmlRemappedRows{corrected, uncorrected, pending != 0, failed != 0}, {}};
}

NvmlStatus NvmlLibrary::watch_xids(Device device) {
  if (fn_->event_set_create == nullptr || fn_->register_events == nullptr || fn_->event_set_wait == nullptr ||
      fn_->event_set_free == nullptr) {
    return missing("nvmlEventSetCreate/nvmlDeviceRegisterEvents/nvmlEventSetWait_v2/nvmlEventSetFree");
  }
  if (watched_.contains(device.handle)) return {};
  if (!events_) {
    EventSet set{};
    const CallMark mark(marker_, "nvmlEventSetCreate");
    if (int rc = fn_->event_set_create(&set); rc != nvml::code::kSuccess) return describe(rc);
    events_ = set;
  }
  const CallMark mark(marker_, "nvmlDeviceRegisterEvents");
  int rc = fn_->register_events(device, nvml::kEventXidCriticalError, *events_);
  if (rc == nvml::code::kUnknown) {
    // "event set is in undefined state and should be freed": start over with a new one next time.
    fn_->event_set_free(*events_);
    events_.reset();
    watched_.clear();
  }
  if (rc != nvml::code::kSuccess) return describe(rc);
  watched_.insert(device.handle);
  return {};
}

NvmlResult<std::vector<NvmlXid>> NvmlLibrary::take_xids() {
  std::vector<NvmlXid> xids;
  if (!events_ || watched_.empty()) return {std::move(xids), {}};
  for (int i = 0; i < kMaxXidsPerTake; ++i) {
    nvml::EventData data{};
    const CallMark mark(marker_, "nvmlEventSetWait_v2");
    int rc = fn_->event_set_wait(*events_, &data, 0);
    if (rc == nvml::code::kTimeout) break;  // nothing (more) pending
    if (rc != nvml::code::kSuccess) {
      if (xids.empty()) return {std::nullopt, describe(rc)};
      break;  // report what arrived; the error comes again next time
    }
    if (data.eventType & nvml::kEventXidCriticalError) xids.push_back({data.device, data.eventData});
  }
  return {std::move(xids), {}};
}

}  // namespace ddprun::launcher

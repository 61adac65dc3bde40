#include "launcher/gpu/gpu_reader.hpp"

#include <cstring>
#include <numeric>
#include <utility>

namespace ddprun::launcher {
namespace {

/// What one call's answer does to a GPU's state beyond its field.
void note_code(GpuState& gpu, int code) {
  if (code == nvml::code::kGpuIsLost) gpu.lost = true;
  if (code == nvml::code::kResetRequired) gpu.reset_required = true;
}

/// Fills `field` from `result` through `convert`, or records its error. A GPU already lost is not
/// asked again: `ask` is not called and the field says GPU_IS_LOST.
template <typename T, typename Ask, typename Convert>
void read_field(GpuState& gpu, GpuField<T>& field, Ask ask, Convert convert) {
  if (gpu.lost) {
    field.error = nvml::code::kGpuIsLost;
    return;
  }
  auto result = ask();
  if (!result.ok()) {
    field.error = result.status.code;
    note_code(gpu, result.status.code);
    return;
  }
  field.value = convert(*result.value);
}

/// The identity strings: empty when NVML does not say (the GPU's other fields carry its error).
void read_identity(NvmlLibrary& nvml, nvml::Device device, GpuState& gpu) {
  auto identity_part = [&](auto result) {
    if (!result.ok()) note_code(gpu, result.status.code);
    return result;
  };
  if (auto uuid = identity_part(nvml.uuid(device)); uuid.ok()) gpu.identity.uuid = *uuid.value;
  if (gpu.lost) return;
  if (auto name = identity_part(nvml.name(device)); name.ok()) gpu.identity.name = *name.value;
  if (gpu.lost) return;
  if (auto pci = identity_part(nvml.pci_info(device)); pci.ok()) {
    gpu.identity.bus_id = std::string(pci.value->busId, ::strnlen(pci.value->busId, sizeof pci.value->busId));
    gpu.identity.pci_order = pci_order_key(pci.value->domain, pci.value->bus, pci.value->device);
  }
}

void mark_unreadable(GpuState& gpu, int code) {
  note_code(gpu, code);
  gpu.utilisation_percent.error = code;
  gpu.memory.error = code;
  gpu.processes.error = code;
  gpu.temperature_c.error = code;
  gpu.power_watts.error = code;
  gpu.throttle_reasons.error = code;
  gpu.uncorrectable_ecc_errors.error = code;
  gpu.retired_pages_pending.error = code;
  gpu.remapped_rows_pending.error = code;
  gpu.xids.error = code;
}

void read_fields(NvmlLibrary& nvml, nvml::Device device, GpuState& gpu) {
  auto same = [](auto value) { return value; };
  read_field(gpu, gpu.utilisation_percent, [&] { return nvml.utilization(device); },
             [](const nvml::Utilization& u) { return u.gpu; });
  read_field(gpu, gpu.memory, [&] { return nvml.memory(device); },
             [](const nvml::Memory& m) { return GpuMemory{m.used, m.total}; });
  read_field(gpu, gpu.processes, [&] { return nvml.compute_processes(device); },
             [](const std::vector<nvml::ProcessInfo>& infos) {
               std::vector<GpuProcess> processes;
               for (const auto& info : infos) {
                 std::optional<std::uint64_t> bytes;
                 if (info.usedGpuMemory != nvml::kValueNotAvailable) bytes = info.usedGpuMemory;
                 processes.push_back({static_cast<pid_t>(info.pid), bytes});
               }
               return processes;
             });
  read_field(gpu, gpu.temperature_c, [&] { return nvml.temperature_c(device); }, same);
  read_field(gpu, gpu.power_watts, [&] { return nvml.power_milliwatts(device); },
             [](unsigned int milliwatts) { return milliwatts / 1000.0; });
  read_field(gpu, gpu.throttle_reasons, [&] { return nvml.clock_event_reasons(device); }, same);
  read_field(gpu, gpu.uncorrectable_ecc_errors, [&] { return nvml.uncorrected_ecc_errors(device); }, same);
  read_field(gpu, gpu.retired_pages_pending, [&] { return nvml.retired_pages_pending(device); }, same);
  read_field(gpu, gpu.remapped_rows_pending, [&] { return nvml.remapped_rows(device); },
             [](const NvmlRemappedRows& rows) { return rows.pending; });
}

}  // namespace

std::vector<GpuState> read_gpus(NvmlLibrary& nvml, const std::vector<unsigned int>& indices,
                                const GpuReadOptions& options, GpuReadMemo* memo) {
  std::vector<GpuState> gpus(indices.size());
  std::vector<std::pair<nvml::Device, std::size_t>> watched;  // device -> its position in gpus
  auto remembered = [&](unsigned int index) -> const GpuIdentity* {
    if (memo == nullptr || index >= memo->identities.size() || !memo->identities[index]) return nullptr;
    return &*memo->identities[index];
  };
  for (std::size_t i = 0; i < indices.size(); ++i) {
    GpuState& gpu = gpus[i];
    gpu.identity.index = indices[i];
    const GpuIdentity* known = remembered(indices[i]);
    auto device = nvml.device(indices[i]);
    if (!device.ok()) {
      if (known != nullptr) gpu.identity = *known;
      mark_unreadable(gpu, device.status.code);
      continue;
    }
    if (known != nullptr) {
      gpu.identity = *known;
    } else {
      read_identity(nvml, *device.value, gpu);
      if (memo != nullptr && !gpu.lost && !gpu.identity.uuid.empty() && !gpu.identity.bus_id.empty()) {
        if (memo->identities.size() <= indices[i]) memo->identities.resize(indices[i] + 1);
        memo->identities[indices[i]] = gpu.identity;
      }
    }
    read_fields(nvml, *device.value, gpu);
    if (!options.xids || gpu.lost) {
      if (gpu.lost) gpu.xids.error = nvml::code::kGpuIsLost;
      continue;
    }
    if (auto watch = nvml.watch_xids(*device.value); !watch.ok()) {
      gpu.xids.error = watch.code;
      note_code(gpu, watch.code);
      continue;
    }
    watched.emplace_back(*device.value, i);
  }
  if (watched.empty()) return gpus;
  auto xids = nvml.take_xids();
  for (const auto& [device, position] : watched) {
    if (xids.ok()) {
      gpus[position].xids.value.emplace();
    } else {
      gpus[position].xids.error = xids.status.code;  // GPU_IS_LOST here names no GPU: "a GPU" fell off
    }
  }
  if (!xids.ok()) return gpus;
  for (const auto& xid : *xids.value) {
    for (const auto& [device, position] : watched) {
      if (device == xid.device) gpus[position].xids.value->push_back(xid.xid);
    }
  }
  return gpus;
}

NvmlResult<std::vector<GpuState>> read_all_gpus(NvmlLibrary& nvml, const GpuReadOptions& options, GpuReadMemo* memo) {
  auto count = nvml.device_count();
  if (!count.ok()) return {std::nullopt, count.status};
  std::vector<unsigned int> indices(*count.value);
  std::iota(indices.begin(), indices.end(), 0u);
  return {read_gpus(nvml, indices, options, memo), {}};
}

}  // namespace ddprun::launcher

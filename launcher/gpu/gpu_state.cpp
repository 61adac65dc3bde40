#include "launcher/gpu/gpu_state.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <string_view>

#include "launcher/base/text.hpp"
#include "launcher/gpu/nvml_abi.hpp"

namespace ddprun::launcher {
namespace {

bool is_index(std::string_view entry) {
  return !entry.empty() && std::all_of(entry.begin(), entry.end(), [](unsigned char c) { return std::isdigit(c); });
}

/// NVML's devices in CUDA's PCI_BUS_ID order: by address, those without one last, by NVML index.
std::vector<const GpuIdentity*> in_pci_order(const std::vector<GpuIdentity>& devices) {
  std::vector<const GpuIdentity*> order;
  for (const auto& device : devices) order.push_back(&device);
  std::stable_sort(order.begin(), order.end(), [](const GpuIdentity* a, const GpuIdentity* b) {
    if (a->pci_order.has_value() != b->pci_order.has_value()) return a->pci_order.has_value();
    if (a->pci_order && *a->pci_order != *b->pci_order) return *a->pci_order < *b->pci_order;
    return a->index < b->index;
  });
  return order;
}

/// The one device whose UUID starts with `prefix`; nothing when none or several do.
const GpuIdentity* match_uuid(std::string_view prefix, const std::vector<GpuIdentity>& devices) {
  const GpuIdentity* found = nullptr;
  for (const auto& device : devices) {
    if (device.uuid.empty() || !std::string_view(device.uuid).starts_with(prefix)) continue;
    if (found != nullptr) return nullptr;
    found = &device;
  }
  return found;
}

}  // namespace

std::uint64_t pci_order_key(unsigned int domain, unsigned int bus, unsigned int device) {
  return (static_cast<std::uint64_t>(domain) << 32) | (static_cast<std::uint64_t>(bus & 0xFFFF) << 16) | (device & 0xFFFF);
}

std::vector<std::string> throttle_reason_names(std::uint64_t reasons) {
  namespace bit = nvml::clock_reason;
  static const std::pair<std::uint64_t, const char*> kNamed[] = {
      {bit::kSwPowerCap, "SwPowerCap"},
      {bit::kHwSlowdown, "HwSlowdown"},
      {bit::kSwThermalSlowdown, "SwThermalSlowdown"},
      {bit::kHwThermalSlowdown, "HwThermalSlowdown"},
      {bit::kHwPowerBrakeSlowdown, "HwPowerBrakeSlowdown"},
  };
  std::vector<std::string> names;
  for (const auto& [mask, name] : kNamed) {
    if ((reasons & mask) != 0) names.emplace_back(name);
  }
  return names;
}

std::optional<std::string> health_problem(const GpuState& gpu) {
  if (gpu.lost) return "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)";
  if (gpu.reset_required) return "needs a reset (NVML: RESET_REQUIRED)";
  if (gpu.retired_pages_pending.value.value_or(false)) {
    return "has retired memory pages pending: they are retired at the next reset";
  }
  if (auto errors = gpu.uncorrectable_ecc_errors.value.value_or(0); errors > 0) {
    return "has had " + std::to_string(errors) + " uncorrectable ECC error" + (errors == 1 ? "" : "s") +
           " since the driver loaded";
  }
  if (gpu.remapped_rows_pending.value.value_or(false)) {
    return "has memory row remapping pending: the rows are remapped at the next reset";
  }
  return std::nullopt;
}

std::string describe_gpu(unsigned int index, const std::string& uuid, const std::string& bus_id) {
  return "GPU " + std::to_string(index) + " (" + (uuid.empty() ? std::string("uuid unknown") : uuid) + ", " +
         (bus_id.empty() ? std::string("bus unknown") : "bus " + bus_id) + ")";
}

std::string describe_unhealthy_gpu(const GpuState& gpu, const std::string& reason) {
  const auto& id = gpu.identity;
  return describe_gpu(id.index, id.uuid, id.bus_id) + " " + reason;
}

VisibleGpus visible_gpus(const std::optional<std::string>& cuda_visible_devices,
                         const std::optional<std::string>& cuda_device_order,
                         const std::vector<GpuIdentity>& nvml_devices) {
  VisibleGpus visible;
  const auto pci_order = in_pci_order(nvml_devices);
  const bool pci_bus_id = cuda_device_order && trim(*cuda_device_order) == "PCI_BUS_ID";
  // Only more than one device has an order to get wrong.
  const bool order_matters = !pci_bus_id && nvml_devices.size() > 1;
  if (!cuda_visible_devices) {
    for (const auto* device : pci_order) visible.nvml_indices.push_back(device->index);
    visible.pci_order_assumed = order_matters;
    return visible;
  }
  std::set<unsigned int> seen;
  std::string_view rest = *cuda_visible_devices;
  while (!trim(rest).empty()) {
    auto comma = rest.find(',');
    std::string_view entry = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const GpuIdentity* device = nullptr;
    if (is_index(entry)) {
      std::size_t position = 0;
      auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), position);
      if (ec == std::errc() && position < pci_order.size()) device = pci_order[position];
      if (device != nullptr && order_matters) visible.pci_order_assumed = true;
    } else if (entry.starts_with("GPU-")) {
      device = match_uuid(entry, nvml_devices);
    }
    // A MIG id, another form, an unknown or ambiguous UUID, an index past the end, a repeat.
    if (device == nullptr || !seen.insert(device->index).second) {
      visible.stopped_at = std::string(entry);
      break;
    }
    visible.nvml_indices.push_back(device->index);
  }
  return visible;
}

std::vector<unsigned int> gpus_in_sight(const GpuSight& sight, const std::vector<GpuIdentity>& nvml_devices) {
  std::set<unsigned int> seen;
  for (const auto& cvd : sight.cuda_visible_devices) {
    const VisibleGpus visible = visible_gpus(cvd, sight.cuda_device_order, nvml_devices);
    seen.insert(visible.nvml_indices.begin(), visible.nvml_indices.end());
    if (!visible.stopped_at) continue;
    for (const auto& device : nvml_devices) {
      if (device.uuid.empty()) seen.insert(device.index);
    }
  }
  return {seen.begin(), seen.end()};
}

GpuMemoryHeld memory_held_by(const std::vector<GpuState>& gpus, const std::vector<pid_t>& pids) {
  GpuMemoryHeld held;
  const std::set<pid_t> wanted(pids.begin(), pids.end());
  std::set<pid_t> holding;
  for (const auto& gpu : gpus) {
    if (!gpu.processes.known()) {
      held.incomplete = true;
      continue;
    }
    for (const auto& process : *gpu.processes.value) {
      if (!wanted.contains(process.pid)) continue;
      holding.insert(process.pid);
      held.bytes += process.bytes.value_or(0);
    }
  }
  held.pids.assign(holding.begin(), holding.end());
  return held;
}

}  // namespace ddprun::launcher

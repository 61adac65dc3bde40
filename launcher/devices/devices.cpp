#include "launcher/devices/devices.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <set>
#include <string_view>

#include "launcher/base/errors.hpp"
#include "launcher/base/text.hpp"

namespace ddprun::launcher {
namespace {

bool is_index(std::string_view entry) {
  return !entry.empty() && std::all_of(entry.begin(), entry.end(), [](unsigned char c) { return std::isdigit(c); });
}

/// `GPU-<hex and dashes>` or `MIG-<id>` (MIG ids also come as `MIG-GPU-<uuid>/<gi>/<ci>`).
bool is_uuid(std::string_view entry) {
  auto body_ok = [&](std::string_view body, std::string_view extra) {
    return !body.empty() && std::all_of(body.begin(), body.end(), [&](unsigned char c) {
      return std::isxdigit(c) || c == '-' || extra.find(static_cast<char>(c)) != std::string_view::npos;
    });
  };
  if (entry.starts_with("GPU-")) return body_ok(entry.substr(4), "");
  if (entry.starts_with("MIG-")) return body_ok(entry.substr(4), "GPU/");
  return false;
}

/// The device a `GPU-` entry names: the one UUID it is a prefix of (as CUDA matches); nothing
/// when none or several match.
std::optional<std::size_t> match_uuid(std::string_view entry, const std::vector<std::string>& uuids) {
  std::optional<std::size_t> found;
  for (std::size_t i = 0; i < uuids.size(); ++i) {
    if (!uuids[i].starts_with(entry)) continue;
    if (found) return std::nullopt;
    found = i;
  }
  return found;
}

/// The non-empty entries of a list, for saying how many it names.
int listed_count(std::string_view list) {
  int count = 0;
  while (!list.empty()) {
    auto comma = list.find(',');
    if (!trim(list.substr(0, comma)).empty()) ++count;
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return count;
}

/// The devices a *_VISIBLE_DEVICES value selects out of `total`; `uuids` (one per device, or
/// empty when unknown) lets `GPU-` entries be checked. Unset: all of them. `indices_known` false:
/// `total` is what a driver that applied the list itself counted, so indices are not checked
/// against it, only the number selected.
std::vector<std::string> select(const std::optional<std::string>& list, int total, const std::vector<std::string>& uuids,
                                bool indices_known = true) {
  std::vector<std::string> names;
  if (!list) {
    for (int i = 0; i < total; ++i) names.push_back(std::to_string(i));
    return names;
  }
  std::set<std::string> seen;  // a device, by index or by the entry when its index is unknown
  std::string_view rest = *list;
  while (!trim(rest).empty() && static_cast<int>(names.size()) < total) {
    auto comma = rest.find(',');
    std::string_view entry = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    std::string device;
    std::string name(entry);
    if (is_index(entry)) {
      int index = 0;
      auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
      if (ec != std::errc() || (indices_known && index >= total)) break;
      device = name = std::to_string(index);  // "01" names device 1, as for CUDA
    } else if (!is_uuid(entry)) {
      break;
    } else if (entry.starts_with("GPU-") && !uuids.empty()) {
      auto index = match_uuid(entry, uuids);
      if (!index) break;
      device = std::to_string(*index);
    } else {
      device = name;  // MIG ids, or UUIDs with no list to check them against: taken on trust
    }
    if (!seen.insert(device).second) break;
    names.push_back(name);
  }
  return names;
}

std::string gpus(int count) { return std::to_string(count) + (count == 1 ? " GPU" : " GPUs"); }

/// "; NAME=VALUE selects K", or nothing when NAME is unset.
std::string selection(const char* name, const std::optional<std::string>& list, std::size_t selected) {
  if (!list) return "";
  return std::string("; ") + name + "=" + *list + " selects " + std::to_string(selected);
}

std::optional<VisibleDevices> nvidia(const DeviceFacts& facts, const Environ& env) {
  auto list = lookup(env, "CUDA_VISIBLE_DEVICES");
  if (facts.nvml_uuids && !facts.nvml_uuids->empty()) {
    const auto& uuids = *facts.nvml_uuids;
    auto names = select(list, static_cast<int>(uuids.size()), uuids);
    std::string source = "NVML: " + gpus(static_cast<int>(uuids.size())) + selection("CUDA_VISIBLE_DEVICES", list, names.size());
    return VisibleDevices{std::move(names), std::move(source)};
  }
  if (facts.cuda_count && *facts.cuda_count > 0) {
    // The driver has applied CUDA_VISIBLE_DEVICES: its count is of the list's first valid entries.
    auto names = select(list, *facts.cuda_count, {}, false);
    std::string source = "CUDA driver: " + gpus(*facts.cuda_count) + " visible" +
                         (list ? " with CUDA_VISIBLE_DEVICES=" + *list : "") + " (NVML: " + facts.nvml_error + ")";
    return VisibleDevices{std::move(names), std::move(source)};
  }
  if (facts.proc_nvidia_gpus && *facts.proc_nvidia_gpus > 0) {
    auto names = select(list, *facts.proc_nvidia_gpus, {});
    std::string source = "/proc/driver/nvidia/gpus: " + gpus(*facts.proc_nvidia_gpus) + " (NVML: " +
                         facts.nvml_error + ")" + selection("CUDA_VISIBLE_DEVICES", list, names.size());
    return VisibleDevices{std::move(names), std::move(source)};
  }
  return std::nullopt;
}

std::optional<VisibleDevices> amd(const DeviceFacts& facts, const Environ& env) {
  if (!facts.kfd_gpus || *facts.kfd_gpus <= 0) return std::nullopt;
  std::string source = "ROCm (/sys/class/kfd): " + gpus(*facts.kfd_gpus);
  auto rocr = lookup(env, "ROCR_VISIBLE_DEVICES");
  auto after_rocr = select(rocr, *facts.kfd_gpus, {});
  source += selection("ROCR_VISIBLE_DEVICES", rocr, after_rocr.size());
  const char* name = lookup(env, "HIP_VISIBLE_DEVICES") ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
  auto list = lookup(env, name);
  auto names = select(list, static_cast<int>(after_rocr.size()), {});
  source += selection(name, list, names.size());
  return VisibleDevices{std::move(names), std::move(source)};
}

}  // namespace

VisibleDevices decide_visible_devices(const DeviceFacts& facts, const Environ& env) {
  if (auto found = nvidia(facts, env)) return *found;
  if (auto found = amd(facts, env)) return *found;
  std::string source = facts.nvml_uuids ? "NVML: no GPU" : "no NVIDIA driver: " + facts.nvml_error;
  if (!facts.cuda_error.empty() && facts.cuda_error != facts.nvml_error) source += ", " + facts.cuda_error;
  if (!facts.proc_nvidia_gpus) source += ", no /proc/driver/nvidia/gpus";
  source += "; no ROCm GPU";
  if (auto list = lookup(env, "CUDA_VISIBLE_DEVICES"); list && listed_count(*list) > 0) {
    source += "; CUDA_VISIBLE_DEVICES=" + *list + " lists " + std::to_string(listed_count(*list));
  }
  return VisibleDevices{{}, std::move(source)};
}

namespace {

/// `listing` names the visible devices when known, so the user sees which ones counted.
void check_enough(int devices_per_worker, int nproc_per_node, int visible_count, const std::string& listing,
                  const std::string& source) {
  if (devices_per_worker < 0) {
    throw UsageError("--devices-per-worker: " + std::to_string(devices_per_worker) + " is not a count >= 0");
  }
  long need = static_cast<long>(devices_per_worker) * std::max(nproc_per_node, 0);
  if (need <= visible_count) return;
  throw UsageError("--devices-per-worker: " + std::to_string(devices_per_worker) + " for each of " +
                   std::to_string(nproc_per_node) + " workers needs " + std::to_string(need) +
                   " CUDA devices, but " + std::to_string(visible_count) + " visible" + listing + " (" +
                   (source.empty() ? "CUDA_VISIBLE_DEVICES and the drivers" : source) + ")");
}

}  // namespace

void require_devices(int devices_per_worker, int nproc_per_node, int visible_count, const std::string& source) {
  check_enough(devices_per_worker, nproc_per_node, visible_count, "", source);
}

std::vector<std::string> assign_devices(const std::vector<std::string>& visible, int devices_per_worker,
                                        int nproc_per_node, const std::string& source) {
  std::string listing;
  for (const auto& device : visible) listing += (listing.empty() ? ": " : ",") + device;
  check_enough(devices_per_worker, nproc_per_node, static_cast<int>(visible.size()), listing, source);
  std::vector<std::string> per_rank;
  if (devices_per_worker == 0) return per_rank;
  for (int rank = 0; rank < nproc_per_node; ++rank) {
    std::string value;
    for (int j = 0; j < devices_per_worker; ++j) {
      if (j > 0) value += ',';
      value += visible[static_cast<std::size_t>(rank * devices_per_worker + j)];
    }
    per_rank.push_back(std::move(value));
  }
  return per_rank;
}

}  // namespace ddprun::launcher

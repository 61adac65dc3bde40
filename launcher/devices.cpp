#include "devices.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include "errors.hpp"
#include "text.hpp"

namespace ddprun::launcher {
namespace {

/// Entries of the driver's per-GPU folder; nothing when it does not exist (no driver loaded).
std::optional<int> driver_gpu_count(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  int count = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    ++count;
  }
  return count;
}

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

}  // namespace

std::vector<std::string> visible_devices(const Environ& env, const std::filesystem::path& nvidia_gpus_dir) {
  std::optional<int> gpus = driver_gpu_count(nvidia_gpus_dir);
  std::vector<std::string> visible;
  auto listed = lookup(env, "CUDA_VISIBLE_DEVICES");
  if (!listed) {
    for (int i = 0; i < gpus.value_or(0); ++i) visible.push_back(std::to_string(i));
    return visible;
  }
  std::set<std::string> seen;
  std::string_view rest = *listed;
  while (!trim(rest).empty()) {
    auto comma = rest.find(',');
    std::string_view entry = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (is_index(entry)) {
      int index = 0;
      auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
      // Without the driver's folder the GPU count is unknown, so an index is taken on trust.
      if (ec != std::errc() || (gpus && index >= *gpus)) break;
      std::string canonical = std::to_string(index);  // "01" names device 1, as for CUDA
      if (!seen.insert(canonical).second) break;
      visible.push_back(canonical);
      continue;
    }
    if (!is_uuid(entry) || !seen.insert(std::string(entry)).second) break;
    visible.emplace_back(entry);
  }
  return visible;
}

namespace {

/// `listing` names the visible devices when known, so the user sees which ones counted.
void check_enough(int devices_per_worker, int nproc_per_node, int visible_count, const std::string& listing) {
  if (devices_per_worker < 0) {
    throw UsageError("--devices-per-worker: " + std::to_string(devices_per_worker) + " is not a count >= 0");
  }
  long need = static_cast<long>(devices_per_worker) * std::max(nproc_per_node, 0);
  if (need <= visible_count) return;
  throw UsageError("--devices-per-worker: " + std::to_string(devices_per_worker) + " for each of " +
                   std::to_string(nproc_per_node) + " workers needs " + std::to_string(need) +
                   " CUDA devices, but " + std::to_string(visible_count) + " visible" + listing +
                   " (from CUDA_VISIBLE_DEVICES, else /proc/driver/nvidia/gpus)");
}

}  // namespace

void require_devices(int devices_per_worker, int nproc_per_node, int visible_count) {
  check_enough(devices_per_worker, nproc_per_node, visible_count, "");
}

std::vector<std::string> assign_devices(const std::vector<std::string>& visible, int devices_per_worker,
                                        int nproc_per_node) {
  std::string listing;
  for (const auto& device : visible) listing += (listing.empty() ? ": " : ",") + device;
  check_enough(devices_per_worker, nproc_per_node, static_cast<int>(visible.size()), listing);
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

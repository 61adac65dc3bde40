#include "launcher/observe/rank_gpus.hpp"

#include <algorithm>

namespace ddprun::launcher {

void GpuXidLog::add(const std::vector<GpuState>& sample) {
  for (const GpuState& gpu : sample) {
    if (!gpu.xids.value || gpu.xids.value->empty()) continue;
    Seen& seen = by_index_[gpu.identity.index];
    for (unsigned long long xid : *gpu.xids.value) {
      ++seen.count;
      seen.last.push_back(xid);
      if (seen.last.size() > kKept) seen.last.pop_front();
    }
  }
}

std::uint64_t GpuXidLog::count(unsigned int index) const {
  auto it = by_index_.find(index);
  return it == by_index_.end() ? 0 : it->second.count;
}

std::vector<unsigned long long> GpuXidLog::last(unsigned int index) const {
  auto it = by_index_.find(index);
  if (it == by_index_.end()) return {};
  return {it->second.last.begin(), it->second.last.end()};
}

namespace {

RankGpu rank_gpu_of(const GpuState& gpu, const std::vector<pid_t>& pids, const GpuXidLog& xids) {
  RankGpu out;
  out.index = gpu.identity.index;
  out.uuid = gpu.identity.uuid;
  out.bus_id = gpu.identity.bus_id;
  out.utilisation_percent = gpu.utilisation_percent.value;
  if (gpu.memory.value) {
    out.memory_used_bytes = gpu.memory.value->used_bytes;
    out.memory_total_bytes = gpu.memory.value->total_bytes;
  }
  if (gpu.processes.value) {
    // A process of the worker listed without an amount (NVML's VALUE_NOT_AVAILABLE) holds some:
    // the sum is then unknown, not the amounts the others reported.
    std::optional<std::uint64_t> own = 0;
    for (const GpuProcess& process : *gpu.processes.value) {
      if (std::find(pids.begin(), pids.end(), process.pid) == pids.end()) continue;
      own = own && process.bytes ? std::optional<std::uint64_t>(*own + *process.bytes) : std::nullopt;
    }
    out.own_memory_bytes = own;
  }
  out.temperature_c = gpu.temperature_c.value;
  out.power_watts = gpu.power_watts.value;
  if (gpu.throttle_reasons.value) out.throttle = throttle_reason_names(*gpu.throttle_reasons.value);
  out.uncorrectable_ecc_errors = gpu.uncorrectable_ecc_errors.value;
  out.xid_count = xids.count(gpu.identity.index);
  out.xids = xids.last(gpu.identity.index);
  out.problem = health_problem(gpu).value_or("");
  return out;
}

}  // namespace

std::vector<RankGpu> rank_gpus(const std::vector<GpuState>& node_gpus, const std::vector<unsigned int>& visible,
                               const std::vector<pid_t>& pids, const GpuXidLog& xids) {
  std::vector<RankGpu> gpus;
  gpus.reserve(visible.size());
  for (unsigned int index : visible) {
    auto it = std::find_if(node_gpus.begin(), node_gpus.end(),
                           [index](const GpuState& gpu) { return gpu.identity.index == index; });
    if (it != node_gpus.end()) gpus.push_back(rank_gpu_of(*it, pids, xids));
  }
  return gpus;
}

std::optional<double> gpu_utilisation_of(const RankStatus& rank) {
  double sum = 0;
  int known = 0;
  for (const RankGpu& gpu : rank.gpus) {
    if (!gpu.utilisation_percent) continue;
    sum += *gpu.utilisation_percent;
    ++known;
  }
  if (known == 0) return std::nullopt;
  return sum / known;
}

}  // namespace ddprun::launcher

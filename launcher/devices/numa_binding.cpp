#include "launcher/devices/numa_binding.hpp"

#include <algorithm>
#include <cctype>

#include "launcher/base/errors.hpp"
#include "launcher/base/text.hpp"
#include "launcher/gpu/gpu_state.hpp"

namespace ddprun::launcher {
namespace {

/// The topology's GPU that CUDA_VISIBLE_DEVICES's `name` means: an index (PCI order), or a GPU-UUID
/// prefix that names one GPU; nothing for another form (MIG-...) or a GPU not found. Read by
/// gpu_state.hpp's visible_gpus, the one reading of CUDA's list that the GPU state and the GPU
/// check use too, over the topology's GPUs (already in PCI order).
std::optional<std::size_t> find_gpu(const NumaTopology& topology, std::string_view name) {
  std::vector<GpuIdentity> gpus(topology.gpus.size());
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    gpus[i].index = static_cast<unsigned int>(i);
    gpus[i].uuid = topology.gpus[i].uuid;
    gpus[i].bus_id = topology.gpus[i].bus_id;
    gpus[i].pci_order = i;
  }
  const VisibleGpus visible = visible_gpus(std::string(name), std::string("PCI_BUS_ID"), gpus);
  if (visible.nvml_indices.empty()) return std::nullopt;
  return visible.nvml_indices.front();
}

CpuSet allowed_on(const NumaTopology& topology, int node, const CpuSet& allowed) {
  CpuSet cpus;
  auto it = topology.node_cpus.find(node);
  if (it == topology.node_cpus.end()) return cpus;
  for (int cpu : it->second) {
    if (allowed.contains(cpu)) cpus.insert(cpu);
  }
  return cpus;
}

/// The node a GPU is on: its numa_node, or the only node when the firmware says -1 on a machine
/// of one node; nothing when it says -1 and there are several.
std::optional<int> node_of(const NumaTopology& topology, const TopologyGpu& gpu) {
  if (gpu.numa_node >= 0) return gpu.numa_node;
  if (topology.node_cpus.size() == 1) return topology.node_cpus.begin()->first;
  return std::nullopt;
}

/// torchrun's socket rule: the node's socket is that of its lowest allowed CPU; every node whose
/// lowest allowed CPU is on that socket belongs to it.
CpuSet socket_cpus(const NumaTopology& topology, int node, const CpuSet& allowed) {
  CpuSet own = allowed_on(topology, node, allowed);
  auto package = topology.package_of.find(*own.begin());
  if (package == topology.package_of.end()) return own;  // socket unknown: the node alone
  CpuSet cpus;
  for (const auto& [other, unused] : topology.node_cpus) {
    CpuSet theirs = allowed_on(topology, other, allowed);
    if (theirs.empty()) continue;
    auto their_package = topology.package_of.find(*theirs.begin());
    if (their_package != topology.package_of.end() && their_package->second == package->second) {
      cpus.insert(theirs.begin(), theirs.end());
    }
  }
  return cpus;
}

/// `cpus` grouped by `key_of` (a CPU without a key: in group -1), the groups in key order.
std::vector<std::pair<int, CpuSet>> group_by(const CpuSet& cpus, const std::map<int, int>& key_of) {
  std::map<int, CpuSet> groups;
  for (int cpu : cpus) {
    auto key = key_of.find(cpu);
    groups[key == key_of.end() ? -1 : key->second].insert(cpu);
  }
  return {groups.begin(), groups.end()};
}

/// torchrun's exclusive rule: the node's physical cores in order, cut into as many runs as the node
/// has GPUs, the first ones one core longer when they do not divide evenly.
CpuSet exclusive_cpus(const NumaTopology& topology, int node, const CpuSet& own, std::size_t position,
                      std::size_t gpus_on_node) {
  auto cores = group_by(own, topology.core_of);
  const std::size_t per_gpu = cores.size() / gpus_on_node;
  const std::size_t extra = cores.size() % gpus_on_node;
  if (per_gpu < 1) {
    throw LaunchError("--numa-binding=exclusive: NUMA node " + std::to_string(node) + " has " +
                      std::to_string(cores.size()) + " physical cores ddprun may use, fewer than its " +
                      std::to_string(gpus_on_node) + " GPUs (use --numa-binding=node, or allow ddprun more CPUs)");
  }
  const std::size_t start = position * per_gpu + std::min(position, extra);
  const std::size_t end = start + per_gpu + (position < extra ? 1 : 0);
  CpuSet cpus;
  for (std::size_t i = start; i < end; ++i) cpus.insert(cores[i].second.begin(), cores[i].second.end());
  return cpus;
}

/// torchrun's core-complex rule: the node's groups of CPUs sharing a last-level cache, the largest
/// first (then by lowest CPU); the GPU's position on the node picks one, round robin.
CpuSet core_complex_cpus(const NumaTopology& topology, const CpuSet& own, std::size_t position) {
  auto caches = group_by(own, topology.cache_of);
  std::stable_sort(caches.begin(), caches.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  return caches[position % caches.size()].second;
}

}  // namespace

std::vector<std::optional<std::string>> worker_gpu_names(const std::vector<std::optional<std::string>>& devices,
                                                         const std::optional<std::string>& visible) {
  std::vector<std::optional<std::string>> names;
  for (std::size_t local_rank = 0; local_rank < devices.size(); ++local_rank) {
    if (devices[local_rank]) {
      names.emplace_back(trim(split(*devices[local_rank], ',').front()));
    } else if (!visible) {
      names.emplace_back(std::to_string(local_rank));
    } else if (auto entries = split(*visible, ','); local_rank < entries.size()) {
      names.emplace_back(trim(entries[local_rank]));
    } else {
      names.emplace_back(std::nullopt);
    }
  }
  return names;
}

std::vector<std::string> job_gpu_names(const NumaTopology& topology, const std::optional<std::string>& visible) {
  std::vector<std::string> names;
  if (visible) {
    for (auto entry : split(*visible, ',')) names.emplace_back(trim(entry));
  } else {
    for (std::size_t i = 0; i < topology.gpus.size(); ++i) names.push_back(std::to_string(i));
  }
  return names;
}

NumaBinding decide_numa_binding(NumaMode mode, const NumaTopology& topology, const CpuSet& allowed,
                                const std::vector<std::optional<std::string>>& gpu_names,
                                const std::vector<std::string>& job_gpus) {
  const std::string flag = "--numa-binding=" + std::string(numa_mode_name(mode));
  NumaBinding binding;
  binding.cpus.assign(gpu_names.size(), std::nullopt);
  if (topology.gpus.empty()) {
    binding.notes.push_back(flag + ": no effect: no NVIDIA GPU found in " + topology.gpu_source +
                            ", and each worker is bound to the CPUs near its GPU");
    return binding;
  }
  // The job's GPUs on each node, in CUDA's order: a worker's share of its node is its GPU's place there.
  std::map<int, std::vector<std::size_t>> node_gpus;
  for (const auto& name : job_gpus) {
    auto gpu = find_gpu(topology, name);
    auto node = gpu ? node_of(topology, topology.gpus[*gpu]) : std::nullopt;
    if (!node) continue;
    auto& list = node_gpus[*node];
    if (std::find(list.begin(), list.end(), *gpu) == list.end()) list.push_back(*gpu);
  }
  for (std::size_t local_rank = 0; local_rank < gpu_names.size(); ++local_rank) {
    const std::string who = flag + ": local rank " + std::to_string(local_rank) + " not bound: ";
    const auto& name = gpu_names[local_rank];
    if (!name) {
      binding.notes.push_back(who + "CUDA_VISIBLE_DEVICES lists no GPU for it");
      continue;
    }
    auto gpu = find_gpu(topology, *name);
    if (!gpu) {
      binding.notes.push_back(who + "its GPU " + *name + " is none of the " + std::to_string(topology.gpus.size()) +
                              " NVIDIA GPUs in " + topology.gpu_source + " (by CUDA index or GPU-UUID)");
      continue;
    }
    const TopologyGpu& device = topology.gpus[*gpu];
    auto node = node_of(topology, device);
    if (!node) {
      binding.notes.push_back(who + "its GPU " + device.bus_id + " has no NUMA node in sysfs (numa_node -1) on a machine of " +
                              std::to_string(topology.node_cpus.size()) + " NUMA nodes");
      continue;
    }
    CpuSet own = allowed_on(topology, *node, allowed);
    if (own.empty()) {
      auto it = topology.node_cpus.find(*node);
      binding.notes.push_back(who + "none of the CPUs of its GPU's NUMA node " + std::to_string(*node) + " (" +
                              (it == topology.node_cpus.end() ? std::string("none listed") : format_cpu_list(it->second)) +
                              ") is one ddprun may use (" + format_cpu_list(allowed) + ")");
      continue;
    }
    auto& on_node = node_gpus[*node];
    if (std::find(on_node.begin(), on_node.end(), *gpu) == on_node.end()) on_node.push_back(*gpu);
    const auto position = static_cast<std::size_t>(std::find(on_node.begin(), on_node.end(), *gpu) - on_node.begin());
    switch (mode) {
      case NumaMode::node: binding.cpus[local_rank] = own; break;
      case NumaMode::socket: binding.cpus[local_rank] = socket_cpus(topology, *node, allowed); break;
      case NumaMode::exclusive: binding.cpus[local_rank] = exclusive_cpus(topology, *node, own, position, on_node.size()); break;
      case NumaMode::core_complex: binding.cpus[local_rank] = core_complex_cpus(topology, own, position); break;
    }
  }
  return binding;
}

}  // namespace ddprun::launcher

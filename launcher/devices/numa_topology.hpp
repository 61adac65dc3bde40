#pragma once
/// The machine's CPUs and NVIDIA GPUs as `--numa-binding` needs them: NUMA nodes and their CPUs,
/// sockets, physical cores, last-level caches, and each GPU's PCI address and NUMA node. Read from
/// sysfs and /proc/driver/nvidia under a root folder, so that tests read recorded trees and the real
/// machine is "/"; no driver library is loaded. What to bind is numa_binding.hpp's, a plain function
/// of this value.
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

using CpuSet = std::set<int>;

/// sysfs's list format, "0-3,8,10-11" -> {0,1,2,3,8,10,11} (spaces and a final newline allowed);
/// nothing for text that is not one.
std::optional<CpuSet> parse_cpu_list(std::string_view text);

/// The same format, compact: {0,1,2,3,8} -> "0-3,8"; "" for no CPU.
std::string format_cpu_list(const CpuSet& cpus);

struct TopologyGpu {
  std::string bus_id;  ///< PCI address as sysfs names it, "0000:3b:00.0"
  std::string uuid;    ///< "GPU-..." from /proc/driver/nvidia/gpus/<bus>/information; empty when unknown
  int numa_node = -1;  ///< /sys/bus/pci/devices/<bus>/numa_node; -1: the firmware does not say
};

struct NumaTopology {
  std::map<int, CpuSet> node_cpus;  ///< NUMA node -> its CPUs (node<N>/cpulist); one node 0 without NUMA
  std::map<int, int> package_of;    ///< CPU -> its socket (topology/physical_package_id), where known
  std::map<int, int> core_of;       ///< CPU -> its physical core, named by the lowest CPU of thread_siblings_list
  std::map<int, int> cache_of;      ///< CPU -> its last-level cache, named by the lowest CPU sharing it, where known
  /// NVIDIA GPUs in PCI bus order, which is CUDA's device order when CUDA_DEVICE_ORDER=PCI_BUS_ID
  /// and, on a machine of identical GPUs, also by default (docs/reference.md, --numa-binding).
  std::vector<TopologyGpu> gpus;
  std::string gpu_source;  ///< where the GPUs were looked for, for messages
};

/// Reads the topology under `root` ("/" for this machine). A file that is missing or unreadable
/// leaves its fact unknown; nothing here throws.
NumaTopology read_numa_topology(const std::filesystem::path& root);

}  // namespace ddprun::launcher

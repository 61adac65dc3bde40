#include "launcher/devices/numa_topology.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <system_error>

#include "common/integer.hpp"
#include "launcher/base/text.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::optional<int> read_int(const fs::path& path) {
  auto text = read_text(path);
  if (!text) return std::nullopt;
  return common::parse_integer<int>(trim(*text));
}

std::optional<int> lowest_of_list(const fs::path& path) {
  auto text = read_text(path);
  if (!text) return std::nullopt;
  auto cpus = parse_cpu_list(*text);
  if (!cpus || cpus->empty()) return std::nullopt;
  return *cpus->begin();
}

/// The names in `dir` that are `prefix` followed by a number, as those numbers.
std::vector<int> numbered_entries(const fs::path& dir, std::string_view prefix) {
  std::vector<int> numbers;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    if (auto n = common::parse_integer<int>(std::string_view(name).substr(prefix.size())); n && *n >= 0) {
      numbers.push_back(*n);
    }
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

/// The CPUs sharing `cpu`'s cache of the highest level that holds data (torchrun: Unified or Data,
/// not Instruction), named by the lowest of them.
std::optional<int> last_level_cache(const fs::path& cpu_dir) {
  int best_level = -1;
  std::optional<int> owner;
  for (int index : numbered_entries(cpu_dir / "cache", "index")) {
    fs::path dir = cpu_dir / "cache" / ("index" + std::to_string(index));
    auto type = read_text(dir / "type");
    if (!type || (trim(*type) != "Unified" && trim(*type) != "Data")) continue;
    auto level = read_int(dir / "level");
    if (!level || *level <= best_level) continue;
    if (auto lowest = lowest_of_list(dir / "shared_cpu_list")) {
      best_level = *level;
      owner = lowest;
    }
  }
  return owner;
}

bool is_nvidia_gpu(const fs::path& device) {
  auto vendor = read_text(device / "vendor");
  auto pci_class = read_text(device / "class");
  if (!vendor || !pci_class || trim(*vendor) != "0x10de") return false;
  std::string_view cls = trim(*pci_class);
  return cls.starts_with("0x0300") || cls.starts_with("0x0302");  // VGA or 3D controller
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

/// The GPUs the NVIDIA kernel driver holds (its folder names are PCI addresses; `information`
/// holds the UUID); without the driver, the PCI devices of NVIDIA's vendor id and a display class.
void read_gpus(const fs::path& root, NumaTopology& topology) {
  const fs::path driver = root / "proc/driver/nvidia/gpus";
  const fs::path pci = root / "sys/bus/pci/devices";
  std::error_code ec;
  for (auto it = fs::directory_iterator(driver, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    TopologyGpu gpu;
    gpu.bus_id = lowercase(it->path().filename().string());
    std::istringstream information(read_text(it->path() / "information").value_or(""));
    for (std::string line; std::getline(information, line);) {
      if (line.starts_with("GPU UUID:")) gpu.uuid = std::string(trim(std::string_view(line).substr(9)));
    }
    topology.gpus.push_back(std::move(gpu));
  }
  topology.gpu_source = "/proc/driver/nvidia/gpus";
  if (topology.gpus.empty()) {
    topology.gpu_source = "/proc/driver/nvidia/gpus and /sys/bus/pci/devices";
    for (auto it = fs::directory_iterator(pci, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (is_nvidia_gpu(it->path())) topology.gpus.push_back({lowercase(it->path().filename().string()), "", -1});
    }
  }
  std::sort(topology.gpus.begin(), topology.gpus.end(),
            [](const TopologyGpu& a, const TopologyGpu& b) { return a.bus_id < b.bus_id; });
  for (auto& gpu : topology.gpus) gpu.numa_node = read_int(pci / gpu.bus_id / "numa_node").value_or(-1);
}

}  // namespace

std::optional<CpuSet> parse_cpu_list(std::string_view text) {
  CpuSet cpus;
  for (std::string_view part : split(trim(text), ',')) {
    part = trim(part);
    if (part.empty()) continue;
    auto dash = part.find('-');
    auto first = common::parse_integer<int>(part.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : common::parse_integer<int>(part.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first) return std::nullopt;
    for (int cpu = *first; cpu <= *last; ++cpu) cpus.insert(cpu);
  }
  return cpus;
}

std::string format_cpu_list(const CpuSet& cpus) {
  std::string text;
  for (auto it = cpus.begin(); it != cpus.end();) {
    int first = *it;
    int last = first;
    for (++it; it != cpus.end() && *it == last + 1; ++it) last = *it;
    if (!text.empty()) text += ',';
    text += std::to_string(first);
    if (last != first) text += "-" + std::to_string(last);
  }
  return text;
}

NumaTopology read_numa_topology(const fs::path& root) {
  NumaTopology topology;
  const fs::path nodes = root / "sys/devices/system/node";
  const fs::path cpus = root / "sys/devices/system/cpu";
  for (int node : numbered_entries(nodes, "node")) {
    auto text = read_text(nodes / ("node" + std::to_string(node)) / "cpulist");
    if (auto list = text ? parse_cpu_list(*text) : std::nullopt) topology.node_cpus[node] = *list;
  }
  if (topology.node_cpus.empty()) {
    // A kernel without NUMA: every CPU on one node, as torchrun's node 0.
    auto online = read_text(cpus / "online");
    if (auto list = online ? parse_cpu_list(*online) : std::nullopt) topology.node_cpus[0] = *list;
  }
  for (const auto& [node, node_cpus] : topology.node_cpus) {
    for (int cpu : node_cpus) {
      const fs::path dir = cpus / ("cpu" + std::to_string(cpu));
      if (auto package = read_int(dir / "topology/physical_package_id")) topology.package_of[cpu] = *package;
      topology.core_of[cpu] = lowest_of_list(dir / "topology/thread_siblings_list").value_or(cpu);
      if (auto cache = last_level_cache(dir)) topology.cache_of[cpu] = *cache;
    }
  }
  read_gpus(root, topology);
  return topology;
}

}  // namespace ddprun::launcher

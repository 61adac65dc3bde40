// --numa-binding: the topology read from fake sysfs trees (built here, file by file, as the kernel
// lays them out) and the decision of each mode by table, on three recorded shapes of machine: one
// NUMA node; two nodes with 4 GPUs each; a GPU whose numa_node is -1.
#include <gtest/gtest.h>

#include "launcher/base/errors.hpp"
#include "launcher/devices/numa_binding.hpp"
#include "launcher/devices/numa_topology.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

using testing_support::ScratchFolder;

CpuSet cpus(const std::string& list) { return parse_cpu_list(list).value(); }

/// A machine's /sys and /proc/driver/nvidia, written under a scratch folder.
class FakeMachine {
 public:
  FakeMachine() : folder_("numa") {}

  const std::filesystem::path& root() const { return folder_.root(); }

  void node(int n, const std::string& cpulist) { write("sys/devices/system/node/node" + std::to_string(n) + "/cpulist", cpulist); }

  /// One CPU: its socket, the CPUs of its physical core, the CPUs sharing its L3 (also an L1
  /// instruction cache shared by nobody, which must not count).
  void cpu(int c, int package, const std::string& siblings, const std::string& l3) {
    const std::string dir = "sys/devices/system/cpu/cpu" + std::to_string(c) + "/";
    write(dir + "topology/physical_package_id", std::to_string(package));
    write(dir + "topology/thread_siblings_list", siblings);
    cache(dir + "cache/index0/", "1", "Data", siblings);
    cache(dir + "cache/index1/", "1", "Instruction", std::to_string(c));
    cache(dir + "cache/index2/", "2", "Unified", siblings);
    cache(dir + "cache/index3/", "3", "Unified", l3);
  }

  /// An NVIDIA GPU as the driver (/proc) and the PCI bus (/sys) show it.
  void gpu(const std::string& bus, int numa_node, const std::string& uuid) {
    write("proc/driver/nvidia/gpus/" + bus + "/information",
          "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 30\nGPU UUID: \t " + uuid + "\nBus Location: \t " + bus + "\n");
    write("sys/bus/pci/devices/" + bus + "/numa_node", std::to_string(numa_node));
    write("sys/bus/pci/devices/" + bus + "/vendor", "0x10de");
    write("sys/bus/pci/devices/" + bus + "/class", "0x030200");
  }

  /// A PCI device that is not a GPU (a NIC of NVIDIA's, once Mellanox's).
  void nic(const std::string& bus) {
    write("sys/bus/pci/devices/" + bus + "/numa_node", "0");
    write("sys/bus/pci/devices/" + bus + "/vendor", "0x15b3");
    write("sys/bus/pci/devices/" + bus + "/class", "0x020000");
  }

  void remove_driver() { std::filesystem::remove_all(root() / "proc/driver/nvidia"); }

 private:
  void write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories((root() / path).parent_path());
    folder_.write(path, text + "\n", 0644);
  }
  void cache(const std::string& dir, const std::string& level, const std::string& type, const std::string& shared) {
    write(dir + "level", level);
    write(dir + "type", type);
    write(dir + "shared_cpu_list", shared);
  }
  ScratchFolder folder_;
};

/// One socket, one NUMA node (the GPUs' numa_node is -1, as such machines often say), 4 cores with
/// 2 threads each (CPU c and c+4), one L3; 2 GPUs.
void one_node_machine(FakeMachine& m) {
  m.node(0, "0-7");
  for (int c = 0; c < 8; ++c) m.cpu(c, 0, std::to_string(c % 4) + "," + std::to_string(c % 4 + 4), "0-7");
  m.gpu("0000:01:00.0", -1, "GPU-aaaa0000");
  m.gpu("0000:02:00.0", -1, "GPU-bbbb0000");
}

/// Two sockets (`sockets` = 1: both nodes on one), one NUMA node each: node 0 = cores 0-7 (threads
/// c and c+16), node 1 = cores 8-15; each node two L3s of 4 cores; 4 GPUs per node.
void two_node_machine(FakeMachine& m, int sockets = 2) {
  m.node(0, "0-7,16-23");
  m.node(1, "8-15,24-31");
  for (int c = 0; c < 32; ++c) {
    const int core = c % 16;
    const int first = core / 4 * 4;  // the L3 of cores first..first+3
    const std::string l3 = std::to_string(first) + "-" + std::to_string(first + 3) + "," + std::to_string(first + 16) +
                           "-" + std::to_string(first + 19);
    m.cpu(c, sockets == 2 ? core / 8 : 0, std::to_string(core) + "," + std::to_string(core + 16), l3);
  }
  const char* buses[] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                         "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};
  // Written out of order: the GPUs' order is the PCI bus order, not the folder's.
  for (int i : {7, 3, 0, 5, 1, 6, 2, 4}) m.gpu(buses[i], i / 4, "GPU-" + std::to_string(i) + "000-uuid");
  m.nic("0000:19:00.0");
}

std::vector<std::optional<std::string>> inherited(int nproc) { return std::vector<std::optional<std::string>>(nproc); }

NumaBinding decide(NumaMode mode, const NumaTopology& topology, int nproc, const std::optional<std::string>& visible = std::nullopt,
                   const CpuSet& allowed = cpus("0-31")) {
  return decide_numa_binding(mode, topology, allowed, worker_gpu_names(inherited(nproc), visible), job_gpu_names(topology, visible));
}

std::string bound(const NumaBinding& binding, std::size_t local_rank) {
  const auto& set = binding.cpus.at(local_rank);
  return set ? format_cpu_list(*set) : "unbound";
}

TEST(NumaTopology, CpuListsReadAndWrite) {
  EXPECT_EQ(cpus("0-3,8,10-11\n"), (CpuSet{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(cpus(""), CpuSet{});
  EXPECT_FALSE(parse_cpu_list("3-1"));
  EXPECT_FALSE(parse_cpu_list("a"));
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({}), "");
}

TEST(NumaTopology, ReadsNodesCoresCachesAndGpusInBusOrder) {
  FakeMachine m;
  two_node_machine(m);
  NumaTopology t = read_numa_topology(m.root());
  EXPECT_EQ(t.node_cpus.at(0), cpus("0-7,16-23"));
  EXPECT_EQ(t.node_cpus.at(1), cpus("8-15,24-31"));
  EXPECT_EQ(t.package_of.at(9), 1);
  EXPECT_EQ(t.core_of.at(21), 5);
  EXPECT_EQ(t.cache_of.at(22), 4);  // the L3 (level 3), not the L1 instruction cache of CPU 22 alone
  ASSERT_EQ(t.gpus.size(), 8U);
  EXPECT_EQ(t.gpus[0].bus_id, "0000:18:00.0");
  EXPECT_EQ(t.gpus[0].uuid, "GPU-0000-uuid");
  EXPECT_EQ(t.gpus[0].numa_node, 0);
  EXPECT_EQ(t.gpus[7].bus_id, "0000:db:00.0");
  EXPECT_EQ(t.gpus[7].numa_node, 1);
}

TEST(NumaTopology, WithoutTheDriverTheGpusComeFromThePciBus) {
  FakeMachine m;
  two_node_machine(m);
  m.remove_driver();
  NumaTopology t = read_numa_topology(m.root());
  ASSERT_EQ(t.gpus.size(), 8U);  // the NIC is not one
  EXPECT_EQ(t.gpus[4].bus_id, "0000:9a:00.0");
  EXPECT_EQ(t.gpus[4].numa_node, 1);
  EXPECT_EQ(t.gpus[4].uuid, "");
}

struct Row {
  const char* name;
  NumaMode mode;
  int nproc;
  std::optional<std::string> visible;  ///< CUDA_VISIBLE_DEVICES of ddprun
  std::vector<std::string> expected;   ///< per local rank: CPU list, or "unbound"
};

TEST(NumaBinding, TwoNodesWithFourGpusEach) {
  FakeMachine m;
  two_node_machine(m);
  const NumaTopology t = read_numa_topology(m.root());
  const Row rows[] = {
      {"node: the GPU's node", NumaMode::node, 8, std::nullopt,
       {"0-7,16-23", "0-7,16-23", "0-7,16-23", "0-7,16-23", "8-15,24-31", "8-15,24-31", "8-15,24-31", "8-15,24-31"}},
      {"socket: one node per socket, so the node", NumaMode::socket, 5, std::nullopt,
       {"0-7,16-23", "0-7,16-23", "0-7,16-23", "0-7,16-23", "8-15,24-31"}},
      {"exclusive: 8 cores for 4 GPUs, 2 cores (4 threads) each", NumaMode::exclusive, 8, std::nullopt,
       {"0-1,16-17", "2-3,18-19", "4-5,20-21", "6-7,22-23", "8-9,24-25", "10-11,26-27", "12-13,28-29", "14-15,30-31"}},
      {"core-complex: 2 L3s per node, round robin", NumaMode::core_complex, 8, std::nullopt,
       {"0-3,16-19", "4-7,20-23", "0-3,16-19", "4-7,20-23", "8-11,24-27", "12-15,28-31", "8-11,24-27", "12-15,28-31"}},
      {"CUDA_VISIBLE_DEVICES picks node 1's GPUs", NumaMode::node, 2, "4,5", {"8-15,24-31", "8-15,24-31"}},
      {"exclusive shares a node among the job's GPUs only", NumaMode::exclusive, 2, "4,5",
       {"8-11,24-27", "12-15,28-31"}},
      {"a GPU-UUID in CUDA_VISIBLE_DEVICES", NumaMode::node, 1, "GPU-6000", {"8-15,24-31"}},
      {"a MIG instance cannot be placed", NumaMode::node, 2, "MIG-1234,0", {"unbound", "0-7,16-23"}},
      {"more workers than listed GPUs", NumaMode::node, 3, "0,1", {"0-7,16-23", "0-7,16-23", "unbound"}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    NumaBinding b = decide(row.mode, t, row.nproc, row.visible);
    ASSERT_EQ(b.cpus.size(), row.expected.size());
    for (std::size_t i = 0; i < row.expected.size(); ++i) EXPECT_EQ(bound(b, i), row.expected[i]) << "local rank " << i;
    const auto unbound = std::count(row.expected.begin(), row.expected.end(), "unbound");
    EXPECT_EQ(b.notes.size(), static_cast<std::size_t>(unbound));
  }
}

TEST(NumaBinding, SocketModeTakesEveryNodeOfTheSocket) {
  FakeMachine m;
  two_node_machine(m, 1);
  NumaBinding b = decide(NumaMode::socket, read_numa_topology(m.root()), 1);
  EXPECT_EQ(bound(b, 0), "0-31");
}

TEST(NumaBinding, OnlyTheCpusDdprunMayUse) {
  FakeMachine m;
  two_node_machine(m);
  const NumaTopology t = read_numa_topology(m.root());
  NumaBinding b = decide(NumaMode::node, t, 5, std::nullopt, cpus("0-3,8-11"));
  EXPECT_EQ(bound(b, 0), "0-3");
  EXPECT_EQ(bound(b, 4), "8-11");
  // A node with none of them: that worker runs unbound, and the note says why.
  b = decide(NumaMode::node, t, 5, std::nullopt, cpus("0-3"));
  EXPECT_EQ(bound(b, 0), "0-3");
  EXPECT_EQ(bound(b, 4), "unbound");
  ASSERT_EQ(b.notes.size(), 1U);
  EXPECT_EQ(b.notes[0], "--numa-binding=node: local rank 4 not bound: none of the CPUs of its GPU's NUMA node 1 "
                        "(8-15,24-31) is one ddprun may use (0-3)");
}

TEST(NumaBinding, ExclusiveFailsWhenANodeHasFewerCoresThanGpus) {
  FakeMachine m;
  two_node_machine(m);
  try {
    decide(NumaMode::exclusive, read_numa_topology(m.root()), 1, std::nullopt, cpus("0-2,16-18"));
    FAIL() << "no error";
  } catch (const LaunchError& e) {
    EXPECT_STREQ(e.what(), "--numa-binding=exclusive: NUMA node 0 has 3 physical cores ddprun may use, fewer than its 4 "
                           "GPUs (use --numa-binding=node, or allow ddprun more CPUs)");
  }
}

TEST(NumaBinding, OneNodeWhoseGpusSayMinusOneIsNodeZero) {
  FakeMachine m;
  one_node_machine(m);
  const NumaTopology t = read_numa_topology(m.root());
  const Row rows[] = {
      {"node", NumaMode::node, 2, std::nullopt, {"0-7", "0-7"}},
      {"socket", NumaMode::socket, 2, std::nullopt, {"0-7", "0-7"}},
      {"exclusive: 4 cores for 2 GPUs", NumaMode::exclusive, 2, std::nullopt, {"0-1,4-5", "2-3,6-7"}},
      {"core-complex: one L3 for both", NumaMode::core_complex, 2, std::nullopt, {"0-7", "0-7"}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    NumaBinding b = decide(row.mode, t, row.nproc, row.visible, cpus("0-7"));
    for (std::size_t i = 0; i < row.expected.size(); ++i) EXPECT_EQ(bound(b, i), row.expected[i]) << "local rank " << i;
    EXPECT_TRUE(b.notes.empty());
  }
}

TEST(NumaBinding, AGpuWithoutANodeOnATwoNodeMachineLeavesItsWorkerUnbound) {
  FakeMachine m;
  two_node_machine(m);
  m.gpu("0000:3a:00.0", -1, "GPU-2000-uuid");  // GPU 2's firmware does not say
  const NumaTopology t = read_numa_topology(m.root());
  for (NumaMode mode : {NumaMode::node, NumaMode::socket, NumaMode::exclusive, NumaMode::core_complex}) {
    SCOPED_TRACE(std::string(numa_mode_name(mode)));
    NumaBinding b = decide(mode, t, 4);
    EXPECT_NE(bound(b, 0), "unbound");
    EXPECT_EQ(bound(b, 2), "unbound");
    ASSERT_EQ(b.notes.size(), 1U);
    EXPECT_EQ(b.notes[0], "--numa-binding=" + std::string(numa_mode_name(mode)) +
                              ": local rank 2 not bound: its GPU 0000:3a:00.0 has no NUMA node in sysfs (numa_node -1) "
                              "on a machine of 2 NUMA nodes");
  }
  // exclusive: node 0 now has 3 known GPUs, so 8 cores split 3-3-2.
  NumaBinding b = decide(NumaMode::exclusive, t, 4);
  EXPECT_EQ(bound(b, 0), "0-2,16-18");
  EXPECT_EQ(bound(b, 1), "3-5,19-21");
  EXPECT_EQ(bound(b, 3), "6-7,22-23");
}

TEST(NumaBinding, AssignedDevicesAreFollowed) {
  FakeMachine m;
  two_node_machine(m);
  const NumaTopology t = read_numa_topology(m.root());
  // --devices-per-worker 2 with CUDA_VISIBLE_DEVICES=3,4,5,6: the first of each worker's GPUs decides.
  std::vector<std::optional<std::string>> devices{"3,4", "5,6"};
  NumaBinding b = decide_numa_binding(NumaMode::node, t, cpus("0-31"), worker_gpu_names(devices, "3,4,5,6"),
                                      job_gpu_names(t, "3,4,5,6"));
  EXPECT_EQ(bound(b, 0), "0-7,16-23");
  EXPECT_EQ(bound(b, 1), "8-15,24-31");
}

TEST(NumaBinding, NoGpuMeansNoEffectInOneLine) {
  FakeMachine m;
  m.node(0, "0-3");
  NumaBinding b = decide(NumaMode::node, read_numa_topology(m.root()), 2, std::nullopt, cpus("0-3"));
  EXPECT_EQ(bound(b, 0), "unbound");
  EXPECT_EQ(bound(b, 1), "unbound");
  ASSERT_EQ(b.notes.size(), 1U);
  EXPECT_EQ(b.notes[0], "--numa-binding=node: no effect: no NVIDIA GPU found in /proc/driver/nvidia/gpus and "
                        "/sys/bus/pci/devices, and each worker is bound to the CPUs near its GPU");
}

}  // namespace
}  // namespace ddprun::launcher

// decide_visible_devices by table over recorded driver answers; probe_devices over a recorded
// /proc and /sys folder; assign_devices.
#include "launcher/devices/devices.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/base/errors.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using Devices = std::vector<std::string>;

const std::string kUuid0 = "GPU-8f6b2d1e-aaaa-bbbb-cccc-0123456789ab";
const std::string kUuid1 = "GPU-8f6b9999-aaaa-bbbb-cccc-0123456789ab";

DeviceFacts no_driver() {
  DeviceFacts facts;
  facts.nvml_error = "libnvidia-ml.so.1 not loadable";
  facts.cuda_error = "cuInit failed: CUDA_ERROR_STUB_LIBRARY";
  return facts;
}
DeviceFacts nvml(std::vector<std::string> uuids) {
  DeviceFacts facts;
  facts.nvml_uuids = std::move(uuids);
  return facts;
}
DeviceFacts nvml_count(int n) {
  std::vector<std::string> uuids;
  for (int i = 0; i < n; ++i) uuids.push_back("GPU-" + std::to_string(1000 + i) + "-ffff");
  return nvml(uuids);
}
DeviceFacts cuda_driver(int n) {
  DeviceFacts facts = no_driver();
  facts.nvml_error = "nvmlInit_v2 failed: Driver Not Loaded";
  facts.cuda_error.clear();
  facts.cuda_count = n;
  return facts;
}
DeviceFacts proc_only(int n) {
  DeviceFacts facts = no_driver();
  facts.proc_nvidia_gpus = n;
  return facts;
}
DeviceFacts kfd(int n) {
  DeviceFacts facts = no_driver();
  facts.kfd_gpus = n;
  return facts;
}

struct Case {
  const char* name;
  DeviceFacts facts;
  Environ env;
  Devices expected;
  const char* source_part;  ///< a piece the source line must hold
};

TEST(DecideVisibleDevices, Table) {
  const Case cases[] = {
      // The issue: no driver, a list of three names no device.
      {"no driver, list", no_driver(), {{"CUDA_VISIBLE_DEVICES", "0,1,2"}}, {},
       "no NVIDIA driver: libnvidia-ml.so.1 not loadable"},
      {"no driver, list counted", no_driver(), {{"CUDA_VISIBLE_DEVICES", "0,1,2"}}, {},
       "CUDA_VISIBLE_DEVICES=0,1,2 lists 3"},
      {"no driver, the stub's failure said", no_driver(), {}, {}, "CUDA_ERROR_STUB_LIBRARY"},
      {"no driver, no list", no_driver(), {}, {}, "no /proc/driver/nvidia/gpus"},
      {"NVML, unset", nvml_count(3), {}, {"0", "1", "2"}, "NVML: 3 GPUs"},
      {"NVML, empty list", nvml_count(4), {{"CUDA_VISIBLE_DEVICES", ""}}, {}, "selects 0"},
      {"NVML, order kept", nvml_count(4), {{"CUDA_VISIBLE_DEVICES", "3,1"}}, {"3", "1"},
       "CUDA_VISIBLE_DEVICES=3,1 selects 2"},
      {"NVML, spaces", nvml_count(4), {{"CUDA_VISIBLE_DEVICES", " 0, 2 "}}, {"0", "2"}, "NVML"},
      {"NVML, 01 is 1", nvml_count(2), {{"CUDA_VISIBLE_DEVICES", "01"}}, {"1"}, "NVML"},
      {"NVML, missing index ends", nvml_count(2), {{"CUDA_VISIBLE_DEVICES", "0,5,1"}}, {"0"}, "selects 1"},
      {"NVML, invalid ends", nvml_count(2), {{"CUDA_VISIBLE_DEVICES", "1,foo,0"}}, {"1"}, "NVML"},
      {"NVML, repeat ends", nvml_count(2), {{"CUDA_VISIBLE_DEVICES", "0,0,1"}}, {"0"}, "NVML"},
      {"NVML, -1 hides all", nvml_count(2), {{"CUDA_VISIBLE_DEVICES", "-1"}}, {}, "NVML"},
      {"NVML, empty entry ends", nvml_count(2), {{"CUDA_VISIBLE_DEVICES", "0,,1"}}, {"0"}, "NVML"},
      {"NVML, UUID prefix", nvml({kUuid0, kUuid1}), {{"CUDA_VISIBLE_DEVICES", "GPU-8f6b9,0"}}, {"GPU-8f6b9", "0"},
       "NVML: 2 GPUs"},
      {"NVML, ambiguous prefix ends", nvml({kUuid0, kUuid1}), {{"CUDA_VISIBLE_DEVICES", "1,GPU-8f6b"}}, {"1"}, "NVML"},
      {"NVML, unknown UUID ends", nvml({kUuid0}), {{"CUDA_VISIBLE_DEVICES", "GPU-abc,0"}}, {}, "NVML"},
      {"NVML, UUID and index of one device", nvml({kUuid0, kUuid1}),
       {{"CUDA_VISIBLE_DEVICES", kUuid0 + ",0"}}, {kUuid0}, "NVML"},
      {"NVML, MIG on trust", nvml({kUuid0}), {{"CUDA_VISIBLE_DEVICES", "MIG-GPU-8f6b2d1e/1/0"}},
       {"MIG-GPU-8f6b2d1e/1/0"}, "NVML"},
      {"NVML, no more than exist", nvml({kUuid0}), {{"CUDA_VISIBLE_DEVICES", "MIG-a,MIG-b"}}, {"MIG-a"}, "NVML"},
      {"NVML answered none", nvml({}), {{"CUDA_VISIBLE_DEVICES", "0"}}, {}, "NVML: no GPU, no /proc/driver/nvidia/gpus; no ROCm GPU"},
      {"CUDA driver applied the list", cuda_driver(2), {{"CUDA_VISIBLE_DEVICES", "5,7,9"}}, {"5", "7"},
       "CUDA driver: 2 GPUs visible with CUDA_VISIBLE_DEVICES=5,7,9 (NVML: nvmlInit_v2 failed"},
      {"CUDA driver, unset", cuda_driver(1), {}, {"0"}, "CUDA driver: 1 GPU visible"},
      {"/proc, unset", proc_only(3), {}, {"0", "1", "2"}, "/proc/driver/nvidia/gpus: 3 GPUs (NVML: libnvidia"},
      {"/proc, index beyond", proc_only(2), {{"CUDA_VISIBLE_DEVICES", "1,2"}}, {"1"}, "selects 1"},
      {"/proc, UUID on trust", proc_only(1), {{"CUDA_VISIBLE_DEVICES", "GPU-abc"}}, {"GPU-abc"}, "/proc"},
      {"/proc folder empty", proc_only(0), {{"CUDA_VISIBLE_DEVICES", "0"}}, {}, "no NVIDIA driver"},
      {"ROCm, unset", kfd(4), {}, {"0", "1", "2", "3"}, "ROCm (/sys/class/kfd): 4 GPUs"},
      {"ROCm, ROCR then HIP", kfd(4), {{"ROCR_VISIBLE_DEVICES", "1,2,3"}, {"HIP_VISIBLE_DEVICES", "0,2,5"}},
       {"0", "2"}, "ROCR_VISIBLE_DEVICES=1,2,3 selects 3; HIP_VISIBLE_DEVICES=0,2,5 selects 2"},
      {"ROCm, CUDA list when no HIP list", kfd(2), {{"CUDA_VISIBLE_DEVICES", "1"}}, {"1"},
       "CUDA_VISIBLE_DEVICES=1 selects 1"},
      {"ROCm, HIP list wins", kfd(2), {{"CUDA_VISIBLE_DEVICES", "1"}, {"HIP_VISIBLE_DEVICES", "0,1"}}, {"0", "1"},
       "HIP_VISIBLE_DEVICES"},
      {"NVIDIA before AMD", [] {
         DeviceFacts f = nvml_count(1);
         f.kfd_gpus = 8;
         return f;
       }(),
       {}, {"0"}, "NVML: 1 GPU"},
  };
  for (const auto& c : cases) {
    VisibleDevices found = decide_visible_devices(c.facts, c.env);
    EXPECT_EQ(found.names, c.expected) << c.name << ": " << found.source;
    EXPECT_NE(found.source.find(c.source_part), std::string::npos) << c.name << ": " << found.source;
    EXPECT_EQ(found.source.find('\n'), std::string::npos) << c.name;
  }
}

/// A recorded /proc and /sys: NVIDIA's per-GPU folders and KFD topology nodes.
class FakeRoot {
 public:
  FakeRoot() {
    root_ = fs::temp_directory_path() / ("ddprun_devices_test_" + std::to_string(::getpid()) + "_" + std::to_string(next_++));
    fs::create_directories(root_);
  }
  ~FakeRoot() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;
  void nvidia_gpus(int count) {
    fs::create_directories(root_ / "proc/driver/nvidia/gpus");
    for (int i = 0; i < count; ++i) fs::create_directory(root_ / ("proc/driver/nvidia/gpus/0000:0" + std::to_string(i) + ":00.0"));
  }
  /// A KFD node as the kernel writes it (properties abridged).
  void kfd_node(int index, int simd_count, int gpu_id) {
    fs::path node = root_ / "sys/class/kfd/kfd/topology/nodes" / std::to_string(index);
    fs::create_directories(node);
    std::ofstream(node / "properties") << "cpu_cores_count " << (simd_count ? 0 : 16) << "\nsimd_count " << simd_count
                                       << "\nmem_banks_count 1\n";
    std::ofstream(node / "gpu_id") << gpu_id << "\n";
  }
  DeviceProbeSettings settings() const { return device_probe_settings(root_.string()); }

 private:
  static inline int next_ = 0;
  fs::path root_;
};

TEST(ProbeDevices, RecordedRootLoadsNoLibrary) {
  FakeRoot root;
  DeviceFacts facts = probe_devices(root.settings());
  EXPECT_FALSE(facts.nvml_uuids);
  EXPECT_FALSE(facts.cuda_count);
  EXPECT_FALSE(facts.proc_nvidia_gpus);
  EXPECT_FALSE(facts.kfd_gpus);
  EXPECT_NE(facts.nvml_error.find("DDPRUN_TEST_DEVICE_ROOT"), std::string::npos);
}

TEST(ProbeDevices, CountsNvidiaProcEntries) {
  FakeRoot root;
  root.nvidia_gpus(3);
  DeviceFacts facts = probe_devices(root.settings());
  ASSERT_TRUE(facts.proc_nvidia_gpus);
  EXPECT_EQ(*facts.proc_nvidia_gpus, 3);
  EXPECT_EQ(decide_visible_devices(facts, {{"CUDA_VISIBLE_DEVICES", "2,0"}}).names, (Devices{"2", "0"}));
}

TEST(ProbeDevices, CountsKfdGpuNodesNotCpuNodes) {
  FakeRoot root;
  root.kfd_node(0, 0, 0);  // the CPU
  root.kfd_node(1, 304, 51234);
  root.kfd_node(2, 304, 62718);
  DeviceFacts facts = probe_devices(root.settings());
  ASSERT_TRUE(facts.kfd_gpus);
  EXPECT_EQ(*facts.kfd_gpus, 2);
  EXPECT_EQ(decide_visible_devices(facts, {}).names, (Devices{"0", "1"}));
}

TEST(ProbeDevices, ThisMachineWithoutDriverCountsNothing) {
  // The machine as it is: where no NVIDIA driver is installed (the CUDA toolkit's stub libcuda.so
  // does not count), nothing is visible whatever CUDA_VISIBLE_DEVICES says.
  std::error_code ec;
  if (fs::exists("/proc/driver/nvidia", ec) || fs::exists("/sys/class/kfd", ec)) GTEST_SKIP() << "this machine has a GPU driver";
  DeviceFacts facts = probe_devices(DeviceProbeSettings{});
  VisibleDevices found = decide_visible_devices(facts, {{"CUDA_VISIBLE_DEVICES", "0,1,2"}});
  EXPECT_TRUE(found.names.empty()) << found.source;
  EXPECT_NE(found.source.find("no NVIDIA driver"), std::string::npos) << found.source;
}

TEST(AssignDevices, OneEach) {
  EXPECT_EQ(assign_devices({"0", "1", "2", "3"}, 1, 2), (Devices{"0", "1"}));
  EXPECT_EQ(assign_devices({"3", "1"}, 1, 2), (Devices{"3", "1"}));
}

TEST(AssignDevices, TwoEach) {
  EXPECT_EQ(assign_devices({"0", "1", "2", "3"}, 2, 2), (Devices{"0,1", "2,3"}));
  EXPECT_EQ(assign_devices({"GPU-a", "GPU-b", "GPU-c", "GPU-d", "GPU-e"}, 2, 2),
            (Devices{"GPU-a,GPU-b", "GPU-c,GPU-d"}));
}

TEST(AssignDevices, ZeroMeansInherit) { EXPECT_TRUE(assign_devices({"0", "1"}, 0, 8).empty()); }

TEST(AssignDevices, TooFewNamesFlagNeedVisibleAndSource) {
  try {
    assign_devices({"0", "1", "2"}, 2, 2, "NVML: 3 GPUs");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    std::string message = e.what();
    EXPECT_EQ(message.rfind("--devices-per-worker", 0), 0U) << message;
    EXPECT_NE(message.find("needs 4"), std::string::npos) << message;
    EXPECT_NE(message.find("3 visible: 0,1,2"), std::string::npos) << message;
    EXPECT_NE(message.find("(NVML: 3 GPUs)"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
  EXPECT_THROW(assign_devices({}, 1, 1), UsageError);
  EXPECT_THROW(assign_devices({"0"}, -1, 1), UsageError);
}

TEST(RequireDevices, ChecksCountsOnly) {
  EXPECT_NO_THROW(require_devices(0, 64, 0));
  EXPECT_NO_THROW(require_devices(2, 4, 8));
  EXPECT_THROW(require_devices(2, 4, 7), UsageError);
}

}  // namespace
}  // namespace ddprun::launcher

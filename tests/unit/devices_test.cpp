// visible_devices and assign_devices: a temporary folder stands in for /proc/driver/nvidia/gpus.
#include "devices.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "errors.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using Devices = std::vector<std::string>;

/// A fake driver folder with one entry per GPU, named like the real ones (PCI bus ids).
class FakeGpus {
 public:
  explicit FakeGpus(int count) {
    root_ = fs::temp_directory_path() /
            ("ddprun_devices_test_" + std::to_string(::getpid()) + "_" + std::to_string(next_++));
    fs::create_directories(root_);
    for (int i = 0; i < count; ++i) fs::create_directory(root_ / ("0000:0" + std::to_string(i) + ":00.0"));
  }
  ~FakeGpus() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  FakeGpus(const FakeGpus&) = delete;
  FakeGpus& operator=(const FakeGpus&) = delete;
  const fs::path& dir() const { return root_; }

 private:
  static inline int next_ = 0;
  fs::path root_;
};

const fs::path kNoDriver = "/nonexistent/ddprun/proc/driver/nvidia/gpus";

TEST(VisibleDevices, CountsDriverEntriesWhenCudaVisibleDevicesUnset) {
  FakeGpus gpus(3);
  EXPECT_EQ(visible_devices({}, gpus.dir()), (Devices{"0", "1", "2"}));
}

TEST(VisibleDevices, NoneWithoutDriverFolder) { EXPECT_TRUE(visible_devices({}, kNoDriver).empty()); }

TEST(VisibleDevices, EmptyValueMeansNone) {
  FakeGpus gpus(4);
  EXPECT_TRUE(visible_devices({{"CUDA_VISIBLE_DEVICES", ""}}, gpus.dir()).empty());
}

TEST(VisibleDevices, KeepsOrderOfTheList) {
  FakeGpus gpus(4);
  EXPECT_EQ(visible_devices({{"CUDA_VISIBLE_DEVICES", "3,1"}}, gpus.dir()), (Devices{"3", "1"}));
  EXPECT_EQ(visible_devices({{"CUDA_VISIBLE_DEVICES", " 0, 2 "}}, gpus.dir()), (Devices{"0", "2"}));
}

TEST(VisibleDevices, StopsAtFirstInvalidEntryLikeCuda) {
  FakeGpus gpus(2);
  auto with = [&](const std::string& value) { return visible_devices({{"CUDA_VISIBLE_DEVICES", value}}, gpus.dir()); };
  EXPECT_EQ(with("0,5,1"), (Devices{"0"}));  // 5: no such GPU
  EXPECT_EQ(with("1,foo,0"), (Devices{"1"}));
  EXPECT_EQ(with("0,0,1"), (Devices{"0"}));  // a repeat ends the list
  EXPECT_TRUE(with("-1").empty());           // the usual way to hide every GPU
  EXPECT_TRUE(with("2").empty());
  EXPECT_EQ(with("0,,1"), (Devices{"0"}));
}

TEST(VisibleDevices, TrustsIndicesWhenDriverFolderIsMissing) {
  EXPECT_EQ(visible_devices({{"CUDA_VISIBLE_DEVICES", "2,3"}}, kNoDriver), (Devices{"2", "3"}));
}

TEST(VisibleDevices, AcceptsGpuAndMigUuids) {
  FakeGpus gpus(1);
  Environ env{{"CUDA_VISIBLE_DEVICES", "GPU-8f6b2d1e-aaaa-bbbb-cccc-0123456789ab,MIG-GPU-8f6b2d1e/1/0,MIG-4c1d-ef"}};
  EXPECT_EQ(visible_devices(env, gpus.dir()),
            (Devices{"GPU-8f6b2d1e-aaaa-bbbb-cccc-0123456789ab", "MIG-GPU-8f6b2d1e/1/0", "MIG-4c1d-ef"}));
  EXPECT_EQ(visible_devices({{"CUDA_VISIBLE_DEVICES", "GPU-abc,GPU-,0"}}, gpus.dir()), (Devices{"GPU-abc"}));
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

TEST(AssignDevices, TooFewNamesFlagNeedAndVisible) {
  try {
    assign_devices({"0", "1", "2"}, 2, 2);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    std::string message = e.what();
    EXPECT_EQ(message.rfind("--devices-per-worker", 0), 0U) << message;
    EXPECT_NE(message.find("needs 4"), std::string::npos) << message;
    EXPECT_NE(message.find("3 visible: 0,1,2"), std::string::npos) << message;
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

// Item 9 of issue 11: `--nproc-per-node gpu|auto` and --devices-per-worker count only GPUs that
// exist, as torchrun (torch.cuda) does, and say where the count came from. The machine itself
// (no driver here: CUDA_VISIBLE_DEVICES names nothing) and recorded /proc and /sys folders
// (DDPRUN_TEST_DEVICE_ROOT) drive the real discovery.
#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>
#include <fstream>

#include "harness.hpp"

using namespace ddprun::testing;
namespace fs = std::filesystem;

namespace {

bool machine_has_gpu_driver() {
  std::error_code ec;
  return fs::exists("/proc/driver/nvidia", ec) || fs::exists("/sys/class/kfd", ec) ||
         fs::exists("/dev/nvidiactl", ec);
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

int started_workers(const TempDir& dir) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) count += entry.path().filename().string().starts_with("env_");
  return count;
}

/// Recorded driver files: NVIDIA's per-GPU folders, or KFD topology nodes (node 0 the CPU).
void record_nvidia(const TempDir& root, int gpus) {
  fs::create_directories(root.path() / "proc/driver/nvidia/gpus");
  for (int i = 0; i < gpus; ++i) fs::create_directory(root.path() / ("proc/driver/nvidia/gpus/0000:0" + std::to_string(i) + ":00.0"));
}
void record_kfd(const TempDir& root, int gpus) {
  for (int i = 0; i <= gpus; ++i) {
    fs::path node = root.path() / "sys/class/kfd/kfd/topology/nodes" / std::to_string(i);
    fs::create_directories(node);
    std::ofstream(node / "properties") << "simd_count " << (i == 0 ? 0 : 304) << "\n";
    std::ofstream(node / "gpu_id") << (i == 0 ? 0 : 4000 + i) << "\n";
  }
}

}  // namespace

TEST(GpuCount, AutoWithoutDriverRunsOneWorkerPerCpuWhateverTheList) {
  if (machine_has_gpu_driver()) GTEST_SKIP() << "this machine has a GPU driver";
  TempDir dir;
  Outcome outcome = run_ddprun({"--master-port", "0", "--nproc-per-node", "auto", test_worker_binary(), "env", dir.str()},
                               {{"CUDA_VISIBLE_DEVICES", "0,1,2"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(started_workers(dir), usable_cpus());  // torchrun: os.cpu_count() when CUDA is not available
}

TEST(GpuCount, GpuWithoutDriverFailsUpFrontSayingWhy) {
  if (machine_has_gpu_driver()) GTEST_SKIP() << "this machine has a GPU driver";
  TempDir dir;
  Outcome outcome = run_ddprun({"--nproc-per-node", "gpu", test_worker_binary(), "env", dir.str()},
                               {{"CUDA_VISIBLE_DEVICES", "0,1,2"}});
  EXPECT_EQ(outcome.exit_status, 2);
  EXPECT_NE(outcome.err.find("--nproc-per-node"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("no NVIDIA driver: libnvidia-ml.so.1 not loadable"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("CUDA_VISIBLE_DEVICES=0,1,2 lists 3"), std::string::npos) << outcome.err;
  EXPECT_EQ(started_workers(dir), 0);
}

TEST(GpuCount, TheToolkitStubIsNoDriver) {
  if (machine_has_gpu_driver()) GTEST_SKIP() << "this machine has a GPU driver";
  const fs::path stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!fs::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  TempDir libs;
  fs::create_symlink(stub, libs.path() / "libcuda.so.1");  // as a careless LD_LIBRARY_PATH would offer it
  TempDir dir;
  Outcome outcome = run_ddprun({"--nproc-per-node", "gpu", test_worker_binary(), "env", dir.str()},
                               {{"LD_LIBRARY_PATH", libs.str()}});
  EXPECT_EQ(outcome.exit_status, 2);
  EXPECT_NE(outcome.err.find("CUDA_ERROR_STUB_LIBRARY"), std::string::npos) << outcome.err;
}

TEST(GpuCount, RecordedNvidiaDriverCountsItsGpusThroughTheList) {
  TempDir root;
  record_nvidia(root, 4);
  TempDir dir;
  // 7 does not exist: CUDA ends the list there, so two GPUs.
  Outcome outcome = run_ddprun({"--master-port", "0", "--nproc-per-node", "gpu", test_worker_binary(), "env", dir.str()},
                               {{"DDPRUN_TEST_DEVICE_ROOT", root.str()}, {"CUDA_VISIBLE_DEVICES", "3,1,7,0"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(started_workers(dir), 2);
}

TEST(GpuCount, RecordedRocmDriverCountsGpuNodes) {
  TempDir root;
  record_kfd(root, 3);
  TempDir dir;
  Outcome outcome = run_ddprun({"--master-port", "0", "--nproc-per-node", "auto", test_worker_binary(), "env", dir.str()},
                               {{"DDPRUN_TEST_DEVICE_ROOT", root.str()}, {"HIP_VISIBLE_DEVICES", "2,0"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(started_workers(dir), 2);
}

TEST(GpuCount, DevicesPerWorkerNeedsGpusThatExist) {
  TempDir root;  // no driver recorded
  TempDir dir;
  Outcome outcome = run_ddprun({"--master-port", "0", "--nproc-per-node", "2", "--devices-per-worker", "1",
                                test_worker_binary(), "env", dir.str()},
                               {{"DDPRUN_TEST_DEVICE_ROOT", root.str()}, {"CUDA_VISIBLE_DEVICES", "0,1"}});
  EXPECT_EQ(outcome.exit_status, 2);
  EXPECT_NE(outcome.err.find("--devices-per-worker"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("no NVIDIA driver"), std::string::npos) << outcome.err;
  EXPECT_EQ(started_workers(dir), 0);
}

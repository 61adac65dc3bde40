// NvmlLibrary against the stand-in NVML (tests/support/nvml_standin.c): loading and what a library
// that is not NVML gets, every typed call's value, NVML's error codes passed on with their names,
// the process list's INSUFFICIENT_SIZE protocol, and Xid events registered, taken once, and
// reported only after registration.
#include <gtest/gtest.h>

#include <string>

#include "launcher/gpu/nvml_library.hpp"
#include "nvml_standin_rig.hpp"

namespace ddprun::launcher {
namespace {

using testing_support::NvmlStandin;
namespace code = nvml::code;

constexpr const char* kTwoGpus =
    "gpu 0 uuid=GPU-aaaa1111-0000-0000-0000-000000000000 bus=00000000:3B:00.0 name=\"NVIDIA H100 80GB HBM3\" "
    "util=87 memutil=40 mem_total=85899345920 mem_used=42949672960 temp=71 power_mw=412345 throttle=0x44 "
    "ecc_uncorrected=2 ecc_uncorrected_agg=9 retired_pending=1 remapped_corrected=3 remapped_uncorrected=1 "
    "remapped_pending=1 remapped_failed=0\n"
    "gpu 1 uuid=GPU-bbbb2222-0000-0000-0000-000000000000 bus=00000000:86:00.0\n"
    "proc 0 pid=4242 used=1073741824\n"
    "proc 0 pid=4243 used=NA\n"
    "proc 1 pid=77 used=5\n";

TEST(NvmlLibraryPath, TheSettingOrTheDriversName) {
  EXPECT_EQ(nvml_library_path(std::nullopt), "libnvidia-ml.so.1");
  EXPECT_EQ(nvml_library_path(""), "libnvidia-ml.so.1");
  EXPECT_EQ(nvml_library_path("/opt/nvidia/lib/libnvidia-ml.so.1"), "/opt/nvidia/lib/libnvidia-ml.so.1");
}

TEST(NvmlLibraryLoad, AFileThatIsMissingOrNotNvml) {
  auto missing = NvmlLibrary::load("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(missing.status.code, code::kLibraryNotFound);
  EXPECT_NE(missing.status.text.find("LIBRARY_NOT_FOUND: "), std::string::npos) << missing.status.text;
  EXPECT_NE(missing.status.text.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << missing.status.text;

  auto not_nvml = NvmlLibrary::load("libm.so.6");  // loads, exports none of NVML
  EXPECT_FALSE(not_nvml.ok());
  EXPECT_EQ(not_nvml.status.code, code::kFunctionNotFound);
  EXPECT_EQ(not_nvml.status.text, "FUNCTION_NOT_FOUND: libm.so.6 has no nvmlInit_v2");
}

TEST(NvmlLibraryInit, BeforeInitAndAFailedInit) {
  NvmlStandin standin;
  standin.answer(kTwoGpus);
  auto loaded = NvmlLibrary::load(NVML_STANDIN_LIBRARY);
  ASSERT_TRUE(loaded.ok()) << loaded.status.text;
  auto& nvml = **loaded.value;
  auto count = nvml.device_count();
  EXPECT_EQ(count.status.code, code::kUninitialized);
  EXPECT_EQ(count.status.text, "UNINITIALIZED: Uninitialized");
  EXPECT_TRUE(nvml.shutdown().ok());  // nothing to shut down: not called

  standin.answer("init_error DRIVER_NOT_LOADED\n");
  auto init = nvml.init();
  EXPECT_EQ(init.code, 9);
  EXPECT_EQ(init.text.rfind("DRIVER_NOT_LOADED", 0), 0u) << init.text;
  EXPECT_EQ(nvml.device_count().status.code, code::kUninitialized);

  standin.answer(kTwoGpus);
  EXPECT_TRUE(nvml.init().ok());
  EXPECT_EQ(nvml.device_count().value, 2u);
  EXPECT_TRUE(nvml.shutdown().ok());
  EXPECT_EQ(nvml.device_count().status.code, code::kUninitialized);  // the only session ended
}

TEST(NvmlLibraryCalls, EveryValue) {
  NvmlStandin standin;
  standin.answer(kTwoGpus);
  auto& nvml = standin.nvml();
  ASSERT_EQ(nvml.device_count().value, 2u);
  auto gpu = nvml.device(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status.text;
  auto device = *gpu.value;
  EXPECT_EQ(nvml.uuid(device).value, "GPU-aaaa1111-0000-0000-0000-000000000000");
  EXPECT_EQ(nvml.name(device).value, "NVIDIA H100 80GB HBM3");
  auto pci = nvml.pci_info(device);
  ASSERT_TRUE(pci.ok()) << pci.status.text;
  EXPECT_STREQ(pci.value->busId, "00000000:3B:00.0");
  EXPECT_EQ(pci.value->bus, 0x3bu);
  auto utilization = nvml.utilization(device);
  ASSERT_TRUE(utilization.ok());
  EXPECT_EQ(utilization.value->gpu, 87u);
  EXPECT_EQ(utilization.value->memory, 40u);
  auto memory = nvml.memory(device);
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory.value->total, 85899345920ULL);
  EXPECT_EQ(memory.value->used, 42949672960ULL);
  EXPECT_EQ(nvml.temperature_c(device).value, 71u);
  EXPECT_EQ(nvml.power_milliwatts(device).value, 412345u);
  EXPECT_EQ(nvml.clock_event_reasons(device).value, 0x44u);
  EXPECT_EQ(nvml.uncorrected_ecc_errors(device).value, 2u);  // volatile, not the aggregate 9
  EXPECT_EQ(nvml.retired_pages_pending(device).value, true);
  auto rows = nvml.remapped_rows(device);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows.value->corrected, 3u);
  EXPECT_EQ(rows.value->uncorrected, 1u);
  EXPECT_TRUE(rows.value->pending);
  EXPECT_FALSE(rows.value->failed);
  EXPECT_EQ(nvml.process_info_size(), nvml::kProcessInfoSize);  // the stand-in is no early R535

  auto processes = nvml.compute_processes(device);
  ASSERT_TRUE(processes.ok()) << processes.status.text;
  ASSERT_EQ(processes.value->size(), 2u);
  EXPECT_EQ((*processes.value)[0].pid, 4242u);
  EXPECT_EQ((*processes.value)[0].usedGpuMemory, 1073741824ULL);
  EXPECT_EQ((*processes.value)[0].gpuInstanceId, 0xFFFFFFFFu);
  EXPECT_EQ((*processes.value)[1].pid, 4243u);
  EXPECT_EQ((*processes.value)[1].usedGpuMemory, nvml::kValueNotAvailable);

  auto other = nvml.device(1);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(*other.value == device);
  auto defaults = nvml.compute_processes(*other.value);
  ASSERT_TRUE(defaults.ok());
  ASSERT_EQ(defaults.value->size(), 1u);
  EXPECT_EQ((*defaults.value)[0].pid, 77u);
  EXPECT_EQ(nvml.device(2).status.code, code::kInvalidArgument);  // index >= count
}

TEST(NvmlLibraryCalls, ProcessListsOfNoneAndOfMany) {
  NvmlStandin standin;
  std::string lines = "gpu 0\ngpu 1\n";
  for (int pid = 1000; pid < 2000; ++pid) lines += "proc 1 pid=" + std::to_string(pid) + " used=" + std::to_string(pid) + "\n";
  standin.answer(lines);
  auto& nvml = standin.nvml();
  auto none = nvml.compute_processes(*nvml.device(0).value);
  ASSERT_TRUE(none.ok()) << none.status.text;
  EXPECT_TRUE(none.value->empty());
  auto many = nvml.compute_processes(*nvml.device(1).value);
  ASSERT_TRUE(many.ok()) << many.status.text;
  ASSERT_EQ(many.value->size(), 1000u);
  EXPECT_EQ(many.value->front().pid, 1000u);
  EXPECT_EQ(many.value->back().pid, 1999u);
  EXPECT_EQ(many.value->back().usedGpuMemory, 1999u);

  // A driver that answers INSUFFICIENT_SIZE whatever it is given: the loop ends with that answer.
  standin.answer(lines + "error 1 nvmlDeviceGetComputeRunningProcesses_v3 INSUFFICIENT_SIZE\n");
  auto stuck = nvml.compute_processes(*nvml.device(1).value);
  EXPECT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.status.code, code::kInsufficientSize);
}

TEST(NvmlLibraryCalls, ErrorsPassedOnWithTheirNames) {
  NvmlStandin standin;
  standin.answer(
      "gpu 0 ecc=0\n"
      "gpu 1\n"
      "gpu 2\n"
      "lost 1\n"
      "error 2 nvmlDeviceGetHandleByIndex_v2 NO_PERMISSION\n"
      "error 0 nvmlDeviceGetPowerUsage NOT_SUPPORTED\n"
      "error 0 nvmlDeviceGetCurrentClocksEventReasons RESET_REQUIRED\n"
      "error 0 nvmlDeviceGetUtilizationRates 27\n");
  auto& nvml = standin.nvml();
  EXPECT_EQ(nvml.device_count().value, 3u);  // the GPU this user may not open still counts
  auto geforce = *nvml.device(0).value;
  auto power = nvml.power_milliwatts(geforce);
  EXPECT_EQ(power.status.code, code::kNotSupported);
  EXPECT_EQ(power.status.text, "NOT_SUPPORTED: Not Supported");
  EXPECT_EQ(nvml.uncorrected_ecc_errors(geforce).status.code, code::kNotSupported);  // no ECC
  EXPECT_EQ(nvml.retired_pages_pending(geforce).status.code, code::kNotSupported);
  EXPECT_EQ(nvml.remapped_rows(geforce).status.code, code::kNotSupported);
  // EventReasons is the one asked (ThrottleReasons only where a driver lacks it).
  EXPECT_EQ(nvml.clock_event_reasons(geforce).status.code, code::kResetRequired);
  EXPECT_EQ(nvml.utilization(geforce).status.text.rfind("NOT_READY", 0), 0u);
  EXPECT_TRUE(nvml.temperature_c(geforce).ok());

  auto lost = nvml.device(1);
  EXPECT_EQ(lost.status.code, code::kGpuIsLost);
  EXPECT_EQ(lost.status.text.rfind("GPU_IS_LOST", 0), 0u) << lost.status.text;
  EXPECT_EQ(nvml.device(2).status.code, code::kNoPermission);

  EXPECT_EQ(nvml.describe(0).text, "");
  EXPECT_TRUE(nvml.describe(0).ok());
  EXPECT_EQ(nvml.describe(12345).text.rfind("error 12345", 0), 0u) << nvml.describe(12345).text;
}

TEST(NvmlLibraryXids, OnlyAfterRegistrationAndEachOnce) {
  NvmlStandin standin;
  const std::string gpus = "gpu 0\ngpu 1\ngpu 2\n";
  standin.answer(gpus + "xid 0 13\n");  // before registration: never reported
  auto& nvml = standin.nvml();
  auto xids = nvml.take_xids();
  ASSERT_TRUE(xids.ok());  // nothing watched: nothing to take
  EXPECT_TRUE(xids.value->empty());

  auto gpu0 = *nvml.device(0).value;
  auto gpu1 = *nvml.device(1).value;
  ASSERT_TRUE(nvml.watch_xids(gpu0).ok());
  ASSERT_TRUE(nvml.watch_xids(gpu1).ok());
  ASSERT_TRUE(nvml.watch_xids(gpu0).ok());  // again: nothing more
  xids = nvml.take_xids();
  ASSERT_TRUE(xids.ok()) << xids.status.text;
  EXPECT_TRUE(xids.value->empty());

  standin.answer(gpus + "xid 0 13\n" + "xid 1 79\nxid 2 48\nevent 0 0x4 0\nxid 0 31\nxid 0 999\n");  // appended
  xids = nvml.take_xids();
  ASSERT_TRUE(xids.ok()) << xids.status.text;
  ASSERT_EQ(xids.value->size(), 3u);  // GPU 2 is not watched, a PState event is not an Xid
  // In the order they came, each with the handle of its GPU.
  EXPECT_TRUE((*xids.value)[0].device == gpu1);
  EXPECT_EQ((*xids.value)[0].xid, 79u);
  EXPECT_TRUE((*xids.value)[1].device == gpu0);
  EXPECT_EQ((*xids.value)[1].xid, 31u);
  EXPECT_TRUE((*xids.value)[2].device == gpu0);
  EXPECT_EQ((*xids.value)[2].xid, 999u);  // an Xid the driver does not know
  EXPECT_TRUE(nvml.take_xids().value->empty());  // each once
}

TEST(NvmlLibraryXids, AGpuWithoutEvents) {
  NvmlStandin standin;
  standin.answer("gpu 0 events=0x4\n");  // PState only: no Xid events here
  auto& nvml = standin.nvml();
  auto watch = nvml.watch_xids(*nvml.device(0).value);
  EXPECT_EQ(watch.code, code::kNotSupported);
  auto xids = nvml.take_xids();
  ASSERT_TRUE(xids.ok());
  EXPECT_TRUE(xids.value->empty());
}

}  // namespace
}  // namespace ddprun::launcher

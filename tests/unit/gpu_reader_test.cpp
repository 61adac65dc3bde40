// read_gpus against the stand-in NVML: every field of a sample, fields NVML cannot give left
// unknown with their error (never 0), GPU_IS_LOST and RESET_REQUIRED turned into the state's flags
// and from there into the health check's line, a GPU this user may not open, Xids between samples,
// and the memory a set of pids holds as the release wait will ask it.
#include <gtest/gtest.h>

#include "launcher/gpu/gpu_reader.hpp"
#include "launcher/gpu/gpu_state.hpp"
#include "nvml_standin_rig.hpp"

namespace ddprun::launcher {
namespace {

using testing_support::NvmlStandin;
namespace code = nvml::code;

TEST(GpuReader, EveryFieldOfASample) {
  NvmlStandin standin;
  standin.answer(
      "gpu 0 uuid=GPU-aaaa1111-0000-0000-0000-000000000000 bus=00000000:86:00.0 name=\"NVIDIA H100 80GB HBM3\" "
      "util=87 mem_total=85899345920 mem_used=42949672960 temp=71 power_mw=412345 throttle=0x45 "
      "ecc_uncorrected=0 retired_pending=0 remapped_pending=0\n"
      "gpu 1 uuid=GPU-bbbb2222-0000-0000-0000-000000000000 bus=00000000:3B:00.0\n"
      "proc 0 pid=4242 used=1073741824\n"
      "proc 0 pid=4243 used=NA\n");
  auto read = read_all_gpus(standin.nvml());
  ASSERT_TRUE(read.ok()) << read.status.text;
  const auto& gpus = *read.value;
  ASSERT_EQ(gpus.size(), 2u);
  const GpuState& gpu = gpus[0];
  EXPECT_EQ(gpu.identity.index, 0u);
  EXPECT_EQ(gpu.identity.uuid, "GPU-aaaa1111-0000-0000-0000-000000000000");
  EXPECT_EQ(gpu.identity.bus_id, "00000000:86:00.0");
  EXPECT_EQ(gpu.identity.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu.identity.pci_order, pci_order_key(0, 0x86, 0));
  EXPECT_EQ(gpu.utilisation_percent.value, 87u);
  ASSERT_TRUE(gpu.memory.known());
  EXPECT_EQ(gpu.memory.value->used_bytes, 42949672960ULL);
  EXPECT_EQ(gpu.memory.value->total_bytes, 85899345920ULL);
  ASSERT_TRUE(gpu.processes.known());
  ASSERT_EQ(gpu.processes.value->size(), 2u);
  EXPECT_EQ((*gpu.processes.value)[0].pid, 4242);
  EXPECT_EQ((*gpu.processes.value)[0].bytes, 1073741824ULL);
  EXPECT_EQ((*gpu.processes.value)[1].pid, 4243);
  EXPECT_EQ((*gpu.processes.value)[1].bytes, std::nullopt);  // NVML_VALUE_NOT_AVAILABLE
  EXPECT_EQ(gpu.temperature_c.value, 71u);
  EXPECT_DOUBLE_EQ(gpu.power_watts.value.value_or(-1), 412.345);
  EXPECT_EQ(gpu.throttle_reasons.value, 0x45u);
  EXPECT_EQ(throttle_reason_names(*gpu.throttle_reasons.value), (std::vector<std::string>{"SwPowerCap", "HwThermalSlowdown"}));
  EXPECT_EQ(gpu.uncorrectable_ecc_errors.value, 0u);
  EXPECT_EQ(gpu.retired_pages_pending.value, false);
  EXPECT_EQ(gpu.remapped_rows_pending.value, false);
  EXPECT_FALSE(gpu.lost);
  EXPECT_FALSE(gpu.reset_required);
  ASSERT_TRUE(gpu.xids.known());
  EXPECT_TRUE(gpu.xids.value->empty());
  EXPECT_TRUE(gpus[1].processes.value->empty());
  EXPECT_EQ(health_problem(gpu), std::nullopt);

  // The worker's view: CUDA index 0 is the first GPU on the bus, NVML's 1.
  std::vector<GpuIdentity> identities = {gpus[0].identity, gpus[1].identity};
  EXPECT_EQ(visible_gpus("0", "PCI_BUS_ID", identities).nvml_indices, std::vector<unsigned int>{1});
  EXPECT_EQ(visible_gpus("GPU-aaaa", std::nullopt, identities).nvml_indices, std::vector<unsigned int>{0});
}

TEST(GpuReader, WhatNvmlCannotSayStaysUnknown) {
  NvmlStandin standin;
  standin.answer(
      "gpu 0 ecc=0 temp=60\n"  // a GeForce board: no ECC, retired pages, remapping
      "error 0 nvmlDeviceGetPowerUsage NOT_SUPPORTED\n"
      "error 0 nvmlDeviceGetComputeRunningProcesses_v3 NO_PERMISSION\n"
      "error 0 nvmlDeviceRegisterEvents NOT_SUPPORTED\n");
  auto read = read_all_gpus(standin.nvml());
  ASSERT_TRUE(read.ok()) << read.status.text;
  const GpuState& gpu = read.value->at(0);
  struct Row {
    const char* field;
    bool known;
    int error;
  };
  const Row rows[] = {
      {"power", gpu.power_watts.known(), gpu.power_watts.error},
      {"processes", gpu.processes.known(), gpu.processes.error},
      {"ecc", gpu.uncorrectable_ecc_errors.known(), gpu.uncorrectable_ecc_errors.error},
      {"retired", gpu.retired_pages_pending.known(), gpu.retired_pages_pending.error},
      {"remapped", gpu.remapped_rows_pending.known(), gpu.remapped_rows_pending.error},
      {"xids", gpu.xids.known(), gpu.xids.error},
  };
  const int expected[] = {code::kNotSupported, code::kNoPermission, code::kNotSupported,
                          code::kNotSupported, code::kNotSupported, code::kNotSupported};
  for (std::size_t i = 0; i < std::size(rows); ++i) {
    EXPECT_FALSE(rows[i].known) << rows[i].field;
    EXPECT_EQ(rows[i].error, expected[i]) << rows[i].field;
  }
  EXPECT_EQ(gpu.temperature_c.value, 60u);  // what it does support is read
  EXPECT_EQ(gpu.temperature_c.error, 0);
  EXPECT_FALSE(gpu.lost);
  EXPECT_EQ(health_problem(gpu), std::nullopt);  // unknown is not unhealthy
  auto held = memory_held_by(*read.value, {4242});
  EXPECT_TRUE(held.incomplete);
  EXPECT_TRUE(held.pids.empty());
}

TEST(GpuReader, LostResetAndUnopenableGpus) {
  NvmlStandin standin;
  standin.answer(
      "gpu 0 uuid=GPU-aaaa1111-0000-0000-0000-000000000000 bus=00000000:1A:00.0\n"
      "gpu 1 uuid=GPU-bbbb2222-0000-0000-0000-000000000000 bus=00000000:3B:00.0\n"
      "gpu 2 uuid=GPU-cccc3333-0000-0000-0000-000000000000 bus=00000000:5E:00.0\n"
      "gpu 3 uuid=GPU-dddd4444-0000-0000-0000-000000000000 bus=00000000:86:00.0 ecc_uncorrected=1\n"
      "lost 1\n"
      "error 2 nvmlDeviceGetTemperature RESET_REQUIRED\n"
      "error 3 nvmlDeviceGetHandleByIndex_v2 NO_PERMISSION\n");
  auto read = read_all_gpus(standin.nvml());
  ASSERT_TRUE(read.ok()) << read.status.text;
  const auto& gpus = *read.value;
  ASSERT_EQ(gpus.size(), 4u);

  EXPECT_FALSE(gpus[0].lost);
  EXPECT_EQ(health_problem(gpus[0]), std::nullopt);

  const GpuState& lost = gpus[1];
  EXPECT_TRUE(lost.lost);
  EXPECT_EQ(lost.identity.index, 1u);
  EXPECT_EQ(lost.identity.uuid, "");  // its handle fails: NVML says nothing of it
  EXPECT_FALSE(lost.memory.known());
  EXPECT_EQ(lost.memory.error, code::kGpuIsLost);
  EXPECT_EQ(lost.xids.error, code::kGpuIsLost);
  ASSERT_TRUE(health_problem(lost).has_value());
  EXPECT_EQ(describe_unhealthy_gpu(lost, *health_problem(lost)),
            "GPU 1 (uuid unknown, bus unknown) has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)");

  const GpuState& reset = gpus[2];
  EXPECT_TRUE(reset.reset_required);
  EXPECT_FALSE(reset.lost);
  EXPECT_EQ(reset.temperature_c.error, code::kResetRequired);
  EXPECT_TRUE(reset.power_watts.known());  // the other calls still answer
  EXPECT_EQ(describe_unhealthy_gpu(reset, health_problem(reset).value()),
            "GPU 2 (GPU-cccc3333-0000-0000-0000-000000000000, bus 00000000:5E:00.0) needs a reset (NVML: RESET_REQUIRED)");

  // A GPU this user may not open: unknown, not lost, and its ECC errors cannot be seen.
  const GpuState& closed = gpus[3];
  EXPECT_FALSE(closed.lost);
  EXPECT_FALSE(closed.uncorrectable_ecc_errors.known());
  EXPECT_EQ(closed.uncorrectable_ecc_errors.error, code::kNoPermission);
  EXPECT_EQ(health_problem(closed), std::nullopt);
}

TEST(GpuReader, AGpuLostAfterItsHandleIsAskedNothingMore) {
  NvmlStandin standin;
  standin.answer("gpu 0 uuid=GPU-aaaa1111-0000-0000-0000-000000000000\nerror 0 nvmlDeviceGetMemoryInfo GPU_IS_LOST\n");
  auto gpus = read_gpus(standin.nvml(), {0});
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_TRUE(gpus[0].lost);
  EXPECT_EQ(gpus[0].identity.uuid, "GPU-aaaa1111-0000-0000-0000-000000000000");  // read before it was lost
  EXPECT_TRUE(gpus[0].utilisation_percent.known());                            // asked before
  EXPECT_EQ(gpus[0].memory.error, code::kGpuIsLost);
  // Not asked after: the stand-in would have answered these.
  EXPECT_FALSE(gpus[0].temperature_c.known());
  EXPECT_EQ(gpus[0].temperature_c.error, code::kGpuIsLost);
  EXPECT_EQ(gpus[0].remapped_rows_pending.error, code::kGpuIsLost);
}

// A memo (one per NVML session: the sampler's thread keeps one) asks each GPU's identity once, and
// names a GPU that is lost later by what it was.
TEST(GpuReader, AMemoReadsIdentitiesOnceAndNamesAGpuLostLater) {
  NvmlStandin standin;
  const std::string gpus =
      "gpu 0 uuid=GPU-aaaa1111-0000-0000-0000-000000000000 bus=00000000:1A:00.0\n"
      "gpu 1 uuid=GPU-bbbb2222-0000-0000-0000-000000000000 bus=00000000:3B:00.0\n";
  standin.answer(gpus);
  GpuReadMemo memo;
  ASSERT_TRUE(read_all_gpus(standin.nvml(), {}, &memo).ok());
  // From now on the UUID call fails: the memo's GPUs are not asked it again.
  standin.answer(gpus + "error * nvmlDeviceGetUUID UNKNOWN\nlost 1\n");
  auto read = read_all_gpus(standin.nvml(), {}, &memo);
  ASSERT_TRUE(read.ok());
  const auto& again = *read.value;
  EXPECT_EQ(again[0].identity.uuid, "GPU-aaaa1111-0000-0000-0000-000000000000");
  EXPECT_FALSE(again[0].lost);
  EXPECT_TRUE(again[1].lost);
  EXPECT_EQ(again[1].identity.uuid, "GPU-bbbb2222-0000-0000-0000-000000000000");
  EXPECT_EQ(again[1].identity.bus_id, "00000000:3B:00.0");
  EXPECT_EQ(describe_unhealthy_gpu(again[1], health_problem(again[1]).value()),
            "GPU 1 (GPU-bbbb2222-0000-0000-0000-000000000000, bus 00000000:3B:00.0) has fallen off the bus or is "
            "inaccessible (NVML: GPU_IS_LOST)");
  // Without the memo, the failing call shows.
  EXPECT_EQ((*read_all_gpus(standin.nvml()).value)[0].identity.uuid, "");
}

TEST(GpuReader, XidsSinceThePreviousSample) {
  NvmlStandin standin;
  const std::string gpus = "gpu 0\ngpu 1\ngpu 2\n";
  standin.answer(gpus);
  auto& nvml = standin.nvml();
  auto first = read_gpus(nvml, {0, 1});  // registers GPUs 0 and 1
  ASSERT_TRUE(first[0].xids.known());
  EXPECT_TRUE(first[0].xids.value->empty());
  standin.answer(gpus + "xid 1 79\nxid 0 13\nxid 1 48\nxid 2 94\n");
  auto second = read_gpus(nvml, {0, 1});
  EXPECT_EQ(second[0].xids.value, std::vector<unsigned long long>{13});
  EXPECT_EQ(second[1].xids.value, (std::vector<unsigned long long>{79, 48}));
  auto third = read_gpus(nvml, {0, 1});
  EXPECT_TRUE(third[0].xids.value->empty());  // each Xid in one sample only
  EXPECT_TRUE(third[1].xids.value->empty());

  auto without = read_gpus(nvml, {0}, GpuReadOptions{.xids = false});
  EXPECT_FALSE(without[0].xids.known());
  EXPECT_EQ(without[0].xids.error, 0);  // not asked
}

TEST(GpuReader, MemoryHeldByTheDeadWorkers) {
  NvmlStandin standin;
  const std::string gpus = "gpu 0\ngpu 1\nproc 0 pid=900 used=100\n";
  standin.answer(gpus + "proc 0 pid=4242 used=1000\nproc 1 pid=4243 used=NA\nproc 1 pid=4242 used=24\n");
  auto held = memory_held_by(*read_all_gpus(standin.nvml()).value, {4242, 4243, 4244});
  EXPECT_EQ(held.bytes, 1024u);
  EXPECT_EQ(held.pids, (std::vector<pid_t>{4242, 4243}));
  EXPECT_FALSE(held.incomplete);

  standin.answer(gpus);  // the driver has freed their memory; another job's process remains
  held = memory_held_by(*read_all_gpus(standin.nvml()).value, {4242, 4243, 4244});
  EXPECT_EQ(held.bytes, 0u);
  EXPECT_TRUE(held.pids.empty());
}

TEST(GpuReader, ACountNvmlCannotGive) {
  NvmlStandin standin;
  standin.answer("gpu 0\nerror * nvmlDeviceGetCount_v2 UNKNOWN\n");
  auto read = read_all_gpus(standin.nvml());
  EXPECT_FALSE(read.ok());
  EXPECT_EQ(read.status.code, code::kUnknown);
}

}  // namespace
}  // namespace ddprun::launcher

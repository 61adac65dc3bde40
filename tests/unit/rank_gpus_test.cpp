// Each rank's GPUs from a sample of the node's (observe/rank_gpus.hpp), by table: the worker's
// GPUs in its own order, NVML's values carried (unknown stays unknown), its own memory from its
// processes only, the Xids kept across samples, the health problem; and the utilisation the GPU
// straggler rule compares.
#include <gtest/gtest.h>

#include "launcher/observe/rank_gpus.hpp"

namespace ddprun::launcher {
namespace {

GpuState gpu(unsigned int index, unsigned int utilisation) {
  GpuState g;
  g.identity = {index, "GPU-" + std::to_string(index), "00000000:1" + std::to_string(index) + ":00.0", "H100",
                pci_order_key(0, 0x10 + index, 0)};
  g.utilisation_percent.value = utilisation;
  g.memory.value = GpuMemory{10ull << 30, 80ull << 30};
  g.processes.value = std::vector<GpuProcess>{{100, 3ull << 30}, {101, 1ull << 30}, {200, 6ull << 30}};
  g.temperature_c.value = 60 + index;
  g.power_watts.value = 300.5;
  g.throttle_reasons.value = 0;
  g.uncorrectable_ecc_errors.value = 0;
  return g;
}

TEST(RankGpus, TheWorkersGpusInItsOrderWithItsOwnMemory) {
  const std::vector<GpuState> node = {gpu(0, 90), gpu(1, 10), gpu(2, 50)};
  GpuXidLog xids;
  const auto gpus = rank_gpus(node, {2, 0}, {100, 101}, xids);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index, 2u);
  EXPECT_EQ(gpus[0].uuid, "GPU-2");
  EXPECT_EQ(gpus[0].bus_id, "00000000:12:00.0");
  EXPECT_EQ(gpus[0].utilisation_percent, 50u);
  EXPECT_EQ(gpus[0].memory_used_bytes, 10ull << 30);
  EXPECT_EQ(gpus[0].memory_total_bytes, 80ull << 30);
  EXPECT_EQ(gpus[0].own_memory_bytes, 4ull << 30);  // pids 100 and 101, not 200
  EXPECT_EQ(gpus[0].temperature_c, 62u);
  EXPECT_EQ(gpus[0].power_watts, 300.5);
  EXPECT_TRUE(gpus[0].throttle.empty());
  EXPECT_EQ(gpus[0].problem, "");
  EXPECT_EQ(gpus[1].index, 0u);
  // A visible index the sample lacks is skipped.
  EXPECT_EQ(rank_gpus(node, {7, 1}, {}, xids).size(), 1u);
}

TEST(RankGpus, UnknownStaysUnknown) {
  GpuState g = gpu(0, 0);
  g.utilisation_percent = {std::nullopt, 3};  // NOT_SUPPORTED
  g.memory = {std::nullopt, 4};               // NO_PERMISSION
  g.processes = {std::nullopt, 3};
  g.temperature_c = {std::nullopt, 3};
  g.power_watts = {std::nullopt, 3};
  g.throttle_reasons = {std::nullopt, 3};
  g.uncorrectable_ecc_errors = {std::nullopt, 3};
  const auto gpus = rank_gpus({g}, {0}, {100}, GpuXidLog{});
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_FALSE(gpus[0].utilisation_percent);
  EXPECT_FALSE(gpus[0].memory_used_bytes);
  EXPECT_FALSE(gpus[0].memory_total_bytes);
  EXPECT_FALSE(gpus[0].own_memory_bytes);
  EXPECT_FALSE(gpus[0].temperature_c);
  EXPECT_FALSE(gpus[0].power_watts);
  EXPECT_FALSE(gpus[0].uncorrectable_ecc_errors);
}

TEST(RankGpus, AnAmountTheDriverCannotTellMakesTheOwnMemoryUnknown) {
  GpuState g = gpu(0, 0);
  g.processes.value = std::vector<GpuProcess>{{100, 3ull << 30}, {101, std::nullopt}, {200, std::nullopt}};
  EXPECT_FALSE(rank_gpus({g}, {0}, {100, 101}, GpuXidLog{})[0].own_memory_bytes);
  // Someone else's unknown amount is not the worker's.
  EXPECT_EQ(rank_gpus({g}, {0}, {100}, GpuXidLog{})[0].own_memory_bytes, 3ull << 30);
  EXPECT_EQ(rank_gpus({g}, {0}, {300}, GpuXidLog{})[0].own_memory_bytes, 0u);
}

TEST(RankGpus, ThrottleNamesAndHealth) {
  GpuState g = gpu(0, 0);
  g.throttle_reasons.value = 0x4 | 0x20;  // SW power cap, SW thermal slowdown
  g.uncorrectable_ecc_errors.value = 2;
  const auto gpus = rank_gpus({g}, {0}, {}, GpuXidLog{});
  EXPECT_EQ(gpus[0].throttle, (std::vector<std::string>{"SwPowerCap", "SwThermalSlowdown"}));
  EXPECT_EQ(gpus[0].problem, "has had 2 uncorrectable ECC errors since the driver loaded");
}

TEST(GpuXidLog, KeepsTheCountAndTheLastEight) {
  GpuXidLog log;
  GpuState g = gpu(1, 0);
  g.xids.value = std::vector<unsigned long long>{79};
  log.add({g});
  g.xids.value = std::vector<unsigned long long>{};
  log.add({g});  // a sample with none keeps what was seen
  EXPECT_EQ(log.count(1), 1u);
  EXPECT_EQ(log.last(1), (std::vector<unsigned long long>{79}));
  g.xids.value = std::vector<unsigned long long>{1, 2, 3, 4, 5, 6, 7, 8, 9};
  log.add({g});
  EXPECT_EQ(log.count(1), 10u);
  EXPECT_EQ(log.last(1), (std::vector<unsigned long long>{2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(log.count(0), 0u);
  const auto gpus = rank_gpus({g}, {1}, {}, log);
  EXPECT_EQ(gpus[0].xid_count, 10u);
  EXPECT_EQ(gpus[0].xids.back(), 9u);
}

TEST(GpuUtilisationOf, TheMeanOfWhatIsKnown) {
  RankStatus rank;
  EXPECT_FALSE(gpu_utilisation_of(rank));
  rank.gpus.resize(3);
  rank.gpus[0].utilisation_percent = 90;
  rank.gpus[2].utilisation_percent = 30;
  EXPECT_EQ(gpu_utilisation_of(rank), 60.0);
}

}  // namespace
}  // namespace ddprun::launcher

// The decisions made from NVML's answers (gpu_state.hpp), by table: which GPU is unhealthy and the
// line that names it, which throttle reasons are named, which NVML devices a worker's
// CUDA_VISIBLE_DEVICES selects and in what order, how much memory a set of pids still holds.
// And nvml_error_name, the words for NVML's codes.
#include <gtest/gtest.h>

#include "launcher/gpu/gpu_state.hpp"
#include "launcher/gpu/nvml_abi.hpp"

namespace ddprun::launcher {
namespace {

GpuState healthy_gpu() {
  GpuState gpu;
  gpu.identity = {2, "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", "00000000:3B:00.0", "NVIDIA H100 80GB HBM3",
                  pci_order_key(0, 0x3b, 0)};
  gpu.uncorrectable_ecc_errors.value = 0;
  gpu.retired_pages_pending.value = false;
  gpu.remapped_rows_pending.value = false;
  return gpu;
}

TEST(GpuHealth, EachReasonAndItsOrder) {
  struct Row {
    const char* what;
    void (*change)(GpuState&);
    std::optional<std::string> problem;
  };
  const Row rows[] = {
      {"healthy", [](GpuState&) {}, std::nullopt},
      {"lost", [](GpuState& g) { g.lost = true; }, "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)"},
      {"reset", [](GpuState& g) { g.reset_required = true; }, "needs a reset (NVML: RESET_REQUIRED)"},
      {"retired pages", [](GpuState& g) { g.retired_pages_pending.value = true; },
       "has retired memory pages pending: they are retired at the next reset"},
      {"one ECC error", [](GpuState& g) { g.uncorrectable_ecc_errors.value = 1; },
       "has had 1 uncorrectable ECC error since the driver loaded"},
      {"ECC errors", [](GpuState& g) { g.uncorrectable_ecc_errors.value = 3; },
       "has had 3 uncorrectable ECC errors since the driver loaded"},
      {"remapping", [](GpuState& g) { g.remapped_rows_pending.value = true; },
       "has memory row remapping pending: the rows are remapped at the next reset"},
      {"lost comes first",
       [](GpuState& g) {
         g.remapped_rows_pending.value = true;
         g.uncorrectable_ecc_errors.value = 2;
         g.lost = true;
       },
       "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)"},
      {"ECC before remapping",
       [](GpuState& g) {
         g.remapped_rows_pending.value = true;
         g.uncorrectable_ecc_errors.value = 2;
       },
       "has had 2 uncorrectable ECC errors since the driver loaded"},
      // Unknown is no reason: a GeForce board has no ECC, no retired pages, no remapping.
      {"nothing supported",
       [](GpuState& g) {
         g.uncorrectable_ecc_errors = {std::nullopt, nvml::code::kNotSupported};
         g.retired_pages_pending = {std::nullopt, nvml::code::kNotSupported};
         g.remapped_rows_pending = {std::nullopt, nvml::code::kNoPermission};
       },
       std::nullopt},
      // Throttling, heat and Xids are shown, not a reason to refuse the GPU.
      {"hot and throttled with an Xid",
       [](GpuState& g) {
         g.temperature_c.value = 95;
         g.throttle_reasons.value = nvml::clock_reason::kHwThermalSlowdown;
         g.xids.value = std::vector<unsigned long long>{79};
       },
       std::nullopt},
  };
  for (const auto& row : rows) {
    GpuState gpu = healthy_gpu();
    row.change(gpu);
    EXPECT_EQ(health_problem(gpu), row.problem) << row.what;
  }
}

TEST(GpuHealth, TheLineNamesIndexUuidAndBus) {
  GpuState gpu = healthy_gpu();
  EXPECT_EQ(describe_unhealthy_gpu(gpu, "needs a reset (NVML: RESET_REQUIRED)"),
            "GPU 2 (GPU-8932f937-d72c-4106-c12f-20bd9faed9f6, bus 00000000:3B:00.0) needs a reset (NVML: RESET_REQUIRED)");
  gpu.identity.uuid.clear();
  gpu.identity.bus_id.clear();
  EXPECT_EQ(describe_unhealthy_gpu(gpu, "is lost"), "GPU 2 (uuid unknown, bus unknown) is lost");
}

TEST(GpuThrottle, OnlyTheReasonsThatSlowAJob) {
  namespace bit = nvml::clock_reason;
  struct Row {
    std::uint64_t mask;
    std::vector<std::string> names;
  };
  const Row rows[] = {
      {0, {}},
      {bit::kGpuIdle, {}},
      {bit::kGpuIdle | bit::kSyncBoost | 0x2 | 0x100, {}},
      {bit::kSwPowerCap, {"SwPowerCap"}},
      {bit::kHwSlowdown | bit::kHwThermalSlowdown, {"HwSlowdown", "HwThermalSlowdown"}},
      {0x1FF, {"SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown", "HwPowerBrakeSlowdown"}},
      {1ULL << 40, {}},  // a reason newer than this list
  };
  for (const auto& row : rows) EXPECT_EQ(throttle_reason_names(row.mask), row.names) << std::hex << row.mask;
}

/// Four GPUs whose NVML index order is not PCI order: NVML index 0 sits on bus 0x86, 1 on 0x3b,
/// 2 on 0x1a, 3 on 0x5e. PCI order: 2, 1, 3, 0.
std::vector<GpuIdentity> four_gpus() {
  return {
      {0, "GPU-aaaa1111-0000-0000-0000-000000000000", "00000000:86:00.0", "H100", pci_order_key(0, 0x86, 0)},
      {1, "GPU-aaaa2222-0000-0000-0000-000000000000", "00000000:3B:00.0", "H100", pci_order_key(0, 0x3b, 0)},
      {2, "GPU-bbbb3333-0000-0000-0000-000000000000", "00000000:1A:00.0", "H100", pci_order_key(0, 0x1a, 0)},
      {3, "GPU-cccc4444-0000-0000-0000-000000000000", "00000000:5E:00.0", "H100", pci_order_key(0, 0x5e, 0)},
  };
}

TEST(VisibleGpus, AsCudaReadsTheList) {
  struct Row {
    std::optional<std::string> visible;
    std::optional<std::string> order;
    std::vector<unsigned int> indices;
    bool assumed;
    std::optional<std::string> stopped_at;
  };
  const std::optional<std::string> pci = "PCI_BUS_ID";
  const std::optional<std::string> unset;
  const Row rows[] = {
      {unset, pci, {2, 1, 3, 0}, false, std::nullopt},  // all, in PCI order
      {unset, unset, {2, 1, 3, 0}, true, std::nullopt},  // FASTEST_FIRST: PCI order assumed
      {unset, "FASTEST_FIRST", {2, 1, 3, 0}, true, std::nullopt},
      {"", pci, {}, false, std::nullopt},  // empty: no GPU
      {"  ", pci, {}, false, std::nullopt},
      {"0", pci, {2}, false, std::nullopt},  // cuda index 0 = the first on the bus
      {"3,0", pci, {0, 2}, false, std::nullopt},
      {" 1 , 2 ", pci, {1, 3}, false, std::nullopt},
      {"01", pci, {1}, false, std::nullopt},
      {"1", unset, {1}, true, std::nullopt},
      {"0,2,-1,1", pci, {2, 3}, false, "-1"},  // CUDA's own example: stops at the invalid entry
      {"0,4,1", pci, {2}, false, "4"},         // past the last GPU
      {"0,0", pci, {2}, false, "0"},           // a repeat ends the list
      {"0,,1", pci, {2}, false, ""},
      {"1gpu", pci, {}, false, "1gpu"},
      {"GPU-bbbb3333-0000-0000-0000-000000000000", unset, {2}, false, std::nullopt},  // UUIDs need no order
      {"GPU-cccc,GPU-aaaa1", unset, {3, 0}, false, std::nullopt},                       // unique prefixes
      {"GPU-aaaa,1", pci, {}, false, "GPU-aaaa"},                                        // ambiguous prefix
      {"GPU-dddd", pci, {}, false, "GPU-dddd"},                                          // no such GPU
      {"GPU-cccc,3", pci, {3, 0}, false, std::nullopt},     // cuda index 3 is NVML 0
      {"GPU-cccc,2", pci, {3}, false, "2"},                // cuda index 2 is NVML 3 again: a repeat
      {"2,GPU-aaaa2", pci, {3, 1}, false, std::nullopt},  // mixed forms
      {"GPU-aaaa2,1", pci, {1}, false, "1"},              // cuda index 1 is NVML 1 again: a repeat
      {"MIG-GPU-aaaa1111-0000-0000-0000-000000000000/1/0", pci, {}, false,
       "MIG-GPU-aaaa1111-0000-0000-0000-000000000000/1/0"},  // MIG: not mapped
      {"0,MIG-abc", pci, {2}, false, "MIG-abc"},
      {"aaaa1111", pci, {}, false, "aaaa1111"},  // a UUID needs its GPU- prefix
  };
  for (const auto& row : rows) {
    auto got = visible_gpus(row.visible, row.order, four_gpus());
    const std::string what = row.visible.value_or("<unset>") + " order " + row.order.value_or("<unset>");
    EXPECT_EQ(got.nvml_indices, row.indices) << what;
    EXPECT_EQ(got.pci_order_assumed, row.assumed) << what;
    EXPECT_EQ(got.stopped_at, row.stopped_at) << what;
  }
}

TEST(VisibleGpus, OneGpuHasNoOrderToAssumeAndUnknownAddressesGoLast) {
  auto one = std::vector<GpuIdentity>{four_gpus()[0]};
  auto got = visible_gpus(std::nullopt, std::nullopt, one);
  EXPECT_EQ(got.nvml_indices, std::vector<unsigned int>{0});
  EXPECT_FALSE(got.pci_order_assumed);

  auto gpus = four_gpus();
  gpus[2].pci_order.reset();  // NVML did not give GPU 2's address
  gpus[2].bus_id.clear();
  EXPECT_EQ(visible_gpus(std::nullopt, "PCI_BUS_ID", gpus).nvml_indices, (std::vector<unsigned int>{1, 3, 0, 2}));
  EXPECT_TRUE(visible_gpus("0", "PCI_BUS_ID", {}).nvml_indices.empty());
  EXPECT_EQ(visible_gpus("0", "PCI_BUS_ID", {}).stopped_at, "0");
}

TEST(GpuMemoryHeld, ThePidsListedAndTheirBytes) {
  auto gpu = [](std::vector<GpuProcess> processes) {
    GpuState state;
    state.processes.value = std::move(processes);
    return state;
  };
  GpuState unlisted;
  unlisted.processes.error = nvml::code::kNoPermission;
  struct Row {
    const char* what;
    std::vector<GpuState> gpus;
    std::vector<pid_t> pids;
    std::uint64_t bytes;
    std::vector<pid_t> holding;
    bool incomplete;
  };
  const Row rows[] = {
      {"no GPU", {}, {100}, 0, {}, false},
      {"nothing listed", {gpu({}), gpu({})}, {100, 101}, 0, {}, false},
      {"others' processes", {gpu({{7, 1000}})}, {100}, 0, {}, false},
      {"one pid on two GPUs", {gpu({{100, 1000}, {7, 5}}), gpu({{100, 24}})}, {100, 101}, 1024, {100}, false},
      {"several, listed out of order", {gpu({{101, 10}, {100, 20}})}, {100, 101}, 30, {100, 101}, false},
      {"an amount the driver cannot say still holds", {gpu({{100, std::nullopt}})}, {100}, 0, {100}, false},
      {"a GPU that cannot list", {gpu({{100, 8}}), unlisted}, {100}, 8, {100}, true},
      {"no pids asked", {gpu({{100, 8}})}, {}, 0, {}, false},
  };
  for (const auto& row : rows) {
    auto held = memory_held_by(row.gpus, row.pids);
    EXPECT_EQ(held.bytes, row.bytes) << row.what;
    EXPECT_EQ(held.pids, row.holding) << row.what;
    EXPECT_EQ(held.incomplete, row.incomplete) << row.what;
  }
}

TEST(NvmlErrorName, KnownCodesAndOthers) {
  struct Row {
    int code;
    const char* name;
  };
  const Row rows[] = {
      {0, "SUCCESS"},          {1, "UNINITIALIZED"},       {3, "NOT_SUPPORTED"},
      {4, "NO_PERMISSION"},    {7, "INSUFFICIENT_SIZE"},   {10, "TIMEOUT"},
      {12, "LIBRARY_NOT_FOUND"}, {13, "FUNCTION_NOT_FOUND"}, {15, "GPU_IS_LOST"},
      {16, "RESET_REQUIRED"},  {25, "ARGUMENT_VERSION_MISMATCH"}, {30, "RESET_TYPE_NOT_SUPPORTED"},
      {999, "UNKNOWN"},        {31, "error 31"},           {-1, "error -1"},
      {998, "error 998"},
  };
  for (const auto& row : rows) EXPECT_EQ(nvml_error_name(row.code), row.name) << row.code;
}

}  // namespace
}  // namespace ddprun::launcher

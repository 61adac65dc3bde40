// What the GPU gate decides from one sample (devices/gpu_gate_rule.hpp), by table: which GPU in
// the workers' sight refuses a start and how the line names it, a GPU out of sight never refuses,
// an unnamed GPU cannot be ruled out of a list that did not map whole; and the release wait's words.
#include <gtest/gtest.h>

#include "launcher/devices/gpu_gate_rule.hpp"

namespace ddprun::launcher {
namespace {

GpuState gpu(unsigned int index) {
  GpuState g;
  g.identity = {index, "GPU-0000000" + std::to_string(index) + "-0000-0000-0000-000000000000",
                "00000000:1" + std::to_string(index) + ":00.0", "NVIDIA H100 80GB HBM3", pci_order_key(0, 0x10 + index, 0)};
  g.uncorrectable_ecc_errors.value = 0;
  g.retired_pages_pending.value = false;
  return g;
}

/// A GPU that fell off the bus: NVML gives no handle, so no identity but its index (gpu_reader.hpp).
GpuState lost(unsigned int index) {
  GpuState g;
  g.identity.index = index;
  g.lost = true;
  return g;
}

GpuSight sight(std::vector<std::optional<std::string>> lists) { return GpuSight{std::move(lists), std::nullopt}; }

TEST(RefuseUnhealthy, Table) {
  auto ecc = gpu(1);
  ecc.uncorrectable_ecc_errors.value = 2;
  auto geforce = gpu(1);  // ECC off: NOT_SUPPORTED, unknown, and no reason
  geforce.uncorrectable_ecc_errors = {std::nullopt, 3};
  geforce.retired_pages_pending = {std::nullopt, 3};
  const std::string ecc_line =
      "GPU 1 (GPU-00000001-0000-0000-0000-000000000000, bus 00000000:11:00.0) has had 2 uncorrectable ECC errors "
      "since the driver loaded: no worker started (--gpu-health off starts them anyway)";
  struct Row {
    const char* what;
    std::vector<GpuState> gpus;
    GpuSight sight;
    std::optional<std::string> refused;
  };
  const Row rows[] = {
      {"healthy, every GPU visible", {gpu(0), gpu(1)}, sight({std::nullopt, std::nullopt}), std::nullopt},
      {"ECC errors on a GPU a worker sees", {gpu(0), ecc}, sight({std::nullopt}), ecc_line},
      {"by index", {gpu(0), ecc}, sight({"0", "1"}), ecc_line},
      {"by UUID prefix", {gpu(0), ecc}, sight({"GPU-00000001"}), ecc_line},
      {"out of every worker's sight", {gpu(0), ecc}, sight({"0", "0"}), std::nullopt},
      {"no worker", {gpu(0), ecc}, sight({}), std::nullopt},
      {"no ECC to ask (GeForce)", {gpu(0), geforce}, sight({std::nullopt}), std::nullopt},
      {"lost, every GPU visible", {gpu(0), lost(1)}, sight({std::nullopt}),
       "GPU 1 (uuid unknown, bus unknown) has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST): no worker "
       "started (--gpu-health off starts them anyway)"},
      // The worker names the lost GPU by UUID, which NVML no longer gives: it cannot be ruled out.
      {"lost, named by a UUID NVML cannot match", {gpu(0), lost(1)}, sight({"GPU-00000001"}),
       "GPU 1 (uuid unknown, bus unknown) has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST): no worker "
       "started (--gpu-health off starts them anyway)"},
      {"lost, out of a list that maps whole", {gpu(0), lost(1)}, sight({"GPU-00000000"}), std::nullopt},
  };
  for (const Row& row : rows) EXPECT_EQ(refuse_unhealthy(row.gpus, row.sight), row.refused) << row.what;
}

TEST(RefuseUnhealthy, ALostGpuIsNamedAsAnEarlierSampleKnewIt) {
  const std::vector<GpuIdentity> known = {gpu(0).identity, gpu(1).identity};
  EXPECT_EQ(refuse_unhealthy({gpu(0), lost(1)}, sight({std::nullopt}), known),
            "GPU 1 (GPU-00000001-0000-0000-0000-000000000000, bus 00000000:11:00.0) has fallen off the bus or is "
            "inaccessible (NVML: GPU_IS_LOST): no worker started (--gpu-health off starts them anyway)");
}

TEST(DescribeHeld, AmountAndPids) {
  EXPECT_EQ(describe_held({1536ull * 1024 * 1024, {4242}, false}), "1.5G by pid 4242");
  EXPECT_EQ(describe_held({2048ull * 1024 * 1024, {4242, 4243}, false}), "2.0G by pids 4242, 4243");
  EXPECT_EQ(describe_held({0, {4242}, false}), "an unknown amount by pid 4242");
}

}  // namespace
}  // namespace ddprun::launcher

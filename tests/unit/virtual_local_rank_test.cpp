// --virtual-local-rank, as torchrun 2.11 (LocalElasticAgent._set_local_rank_env): every worker gets
// LOCAL_RANK=0 and a CUDA_VISIBLE_DEVICES of its own GPU, the local_rank-th entry of the
// launcher's CUDA_VISIBLE_DEVICES (or "local_rank" when unset); with --devices-per-worker, its
// own GPUs as assigned. RANK and the rest stay as they were.
#include <gtest/gtest.h>

#include "cli_parse.hpp"
#include "launcher/workers/worker_env.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

std::vector<std::optional<std::string>> devices_of(const Args& args, const Environ& env = kNoPath,
                                                   const HostFacts& host = kCpuHost) {
  return parse(args, env, host).devices;
}

TEST(VirtualLocalRank, EachWorkerGetsItsEntryOfCudaVisibleDevices) {
  using Devices = std::vector<std::optional<std::string>>;
  Environ env = kNoPath;
  EXPECT_EQ(devices_of({"--virtual-local-rank", "--nproc-per-node", "3", "t.py"}), (Devices{"0", "1", "2"}));
  env["CUDA_VISIBLE_DEVICES"] = "4, 6,GPU-abc";
  EXPECT_EQ(devices_of({"--virtual-local-rank", "--nproc-per-node", "3", "t.py"}, env), (Devices{"4", "6", "GPU-abc"}));
  // Without the flag every worker inherits the variable, as before.
  EXPECT_EQ(devices_of({"--nproc-per-node", "2", "t.py"}, env), (Devices{std::nullopt, std::nullopt}));
}

TEST(VirtualLocalRank, WithDevicesPerWorkerEachKeepsItsAssignment) {
  using Devices = std::vector<std::optional<std::string>>;
  HostFacts host = kGpuHost;
  host.count_devices = [] { return VisibleDevices{{"0", "1", "2", "3"}, "test: 4 GPUs"}; };
  EXPECT_EQ(devices_of({"--virtual-local-rank", "--devices-per-worker", "2", "--nproc-per-node", "2", "t.py"}, kNoPath, host),
            (Devices{"0,1", "2,3"}));
}

TEST(VirtualLocalRank, TooFewGpusListedIsAUsageError) {
  Environ env = kNoPath;
  env["CUDA_VISIBLE_DEVICES"] = "0,1";
  EXPECT_EQ(usage_error({"--virtual-local-rank", "--nproc-per-node", "3", "t.py"}, env),
            "--virtual-local-rank: local rank 2 has no GPU of its own: CUDA_VISIBLE_DEVICES=0,1 lists 2 (start fewer "
            "workers, or list more GPUs)");
}

TEST(VirtualLocalRank, TheWorkerEnvironment) {
  WorkerSpec spec;
  spec.local_rank = 3;
  spec.rank = 11;
  spec.local_world_size = 4;
  spec.cuda_visible_devices = "6";
  spec.virtual_local_rank = true;
  Environ env = build_worker_env(Environ{{"CUDA_VISIBLE_DEVICES", "0,2,4,6"}}, spec);
  EXPECT_EQ(env["LOCAL_RANK"], "0");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "6");
  EXPECT_EQ(env["RANK"], "11");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  spec.virtual_local_rank = false;
  EXPECT_EQ(build_worker_env(Environ{}, spec)["LOCAL_RANK"], "3");
}

}  // namespace
}  // namespace ddprun::launcher

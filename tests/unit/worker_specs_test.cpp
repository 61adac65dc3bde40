// worker_specs: each local rank's spec from the command line and the attempt's place in the job.
#include "launcher/workers/worker_specs.hpp"

#include <gtest/gtest.h>

#include "cli_parse.hpp"

namespace ddprun::launcher {
namespace {

using cli_testing::parse;

const WorkerCommand kCommand{"/bin/true", {"true", "--rank=${local_rank}"}, std::nullopt};

TEST(WorkerSpecs, OnePerLocalRankAtTheAttemptsPlace) {
  LaunchConfig config = parse({"--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "2", "--master-addr",
                               "10.0.0.1", "/bin/true"});
  AttemptFacts facts;
  facts.place = {.rank_base = 2, .world_size = 4, .group_rank = 1, .group_world_size = 2, .attempt = 3, .restarts = 1};
  facts.master = {"10.0.0.1", 29500};
  facts.restart_count = 3;
  facts.terminal = WorkerTerminal::pty;
  const std::vector<WorkerSpec> specs = worker_specs(config, kCommand, facts);
  ASSERT_EQ(specs.size(), 2U);
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    const WorkerSpec& spec = specs[static_cast<std::size_t>(local_rank)];
    EXPECT_EQ(spec.local_rank, local_rank);
    EXPECT_EQ(spec.rank, 2 + local_rank);
    EXPECT_EQ(spec.local_world_size, 2);
    EXPECT_EQ(spec.world_size, 4);
    EXPECT_EQ(spec.group_rank, 1);
    EXPECT_EQ(spec.group_world_size, 2);
    EXPECT_EQ(spec.role_rank, spec.rank);
    EXPECT_EQ(spec.master_addr, "10.0.0.1");
    EXPECT_EQ(spec.master_port, 29500);
    EXPECT_EQ(spec.restart_count, 3);
    EXPECT_EQ(spec.terminal, WorkerTerminal::pty);
    EXPECT_EQ(spec.executable, "/bin/true");
    EXPECT_EQ(spec.argv, (std::vector<std::string>{"true", "--rank=" + std::to_string(local_rank)}));
    EXPECT_TRUE(spec.cpu_affinity.empty());
    EXPECT_FALSE(spec.reads_stdin);  // --stdin rank0: global rank 0 is on the other node
  }
}

TEST(WorkerSpecs, StdinGoesToGlobalRankZeroOrToAll) {
  AttemptFacts facts;
  facts.place.world_size = 2;
  LaunchConfig rank0 = parse({"--nproc-per-node", "2", "/bin/true"});
  auto specs = worker_specs(rank0, kCommand, facts);
  EXPECT_TRUE(specs[0].reads_stdin);
  EXPECT_FALSE(specs[1].reads_stdin);
  LaunchConfig all = parse({"--nproc-per-node", "2", "--stdin", "all", "/bin/true"});
  specs = worker_specs(all, kCommand, facts);
  EXPECT_TRUE(specs[0].reads_stdin && specs[1].reads_stdin);
}

TEST(WorkerSpecs, NumaCpusAndLibTorchAsGiven) {
  LaunchConfig config = parse({"--nproc-per-node", "2", "/bin/true"});
  const std::vector<std::vector<int>> cpus = {{0, 1}, {}};
  AttemptFacts facts;
  facts.numa_cpus = &cpus;
  facts.libtorch_1 = true;
  const auto specs = worker_specs(config, kCommand, facts);
  EXPECT_EQ(specs[0].cpu_affinity, (std::vector<int>{0, 1}));
  EXPECT_TRUE(specs[1].cpu_affinity.empty());
  EXPECT_TRUE(specs[0].libtorch_1 && specs[1].libtorch_1);
}

}  // namespace
}  // namespace ddprun::launcher

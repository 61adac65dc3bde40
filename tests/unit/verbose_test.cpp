// The -v lines by table: the launch config, an attempt's start, a worker's start, quoting.
#include "launcher/cli/verbose.hpp"

#include <gtest/gtest.h>

#include <csignal>

namespace ddprun::launcher {
namespace {

using Lines = std::vector<std::string>;

TEST(QuoteCommand, Table) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"/usr/bin/python3", "-u", "train.py", "--lr=0.1"}, "/usr/bin/python3 -u train.py --lr=0.1"},
      {{"echo", "hi there"}, "echo 'hi there'"},
      {{"echo", "it's"}, "echo 'it'\\''s'"},
      {{"echo", ""}, "echo ''"},
      {{"echo", "${local_rank}"}, "echo '${local_rank}'"},
      {{"echo", "a\nb"}, "echo 'a\\x0ab'"},
      {{"x", "--data=/d/a,b:c@host%1+2"}, "x --data=/d/a,b:c@host%1+2"},
  };
  for (const auto& [argv, expected] : cases) EXPECT_EQ(quote_command(argv), expected);
}

TEST(DescribeLaunchConfig, SingleNodePythonScript) {
  LaunchConfig config;
  config.program = "train.py";
  config.topology.nproc_per_node = 4;
  config.max_restarts = 3;
  config.rdzv_id = "job7";
  LaunchFacts facts;
  facts.executable = "/venv/bin/python";
  facts.argv = {"/venv/bin/python", "-u", "train.py", "--shard=${local_rank}"};
  facts.interpreter = "/venv/bin/python (VIRTUAL_ENV=/venv)";
  facts.device_source = "NVML: 4 GPUs";
  facts.master = "127.0.0.1:29500";
  facts.log_dir = "/tmp/logs/job7_abc";
  EXPECT_EQ(describe_launch_config(config, facts),
            (Lines{"launch config:",
                   "  entrypoint      : train.py",
                   "  command         : /venv/bin/python -u train.py '--shard=${local_rank}'",
                   "  interpreter     : /venv/bin/python (VIRTUAL_ENV=/venv)",
                   "  nnodes          : 1",
                   "  nproc_per_node  : 4",
                   "  gpus            : NVML: 4 GPUs",
                   "  node_rank       : 0",
                   "  run_id          : job7",
                   "  rdzv_backend    : static",
                   "  rdzv_endpoint   : 127.0.0.1:29500",
                   "  rdzv_configs    : (none)",
                   "  max_restarts    : 3",
                   "  master          : 127.0.0.1:29500",
                   "  log_dir         : /tmp/logs/job7_abc",
                   "  forward_signals : SIGUSR1,SIGUSR2"}));
}

TEST(DescribeLaunchConfig, ElasticExecutableWithoutGpuCount) {
  LaunchConfig config;
  config.program = "trainer";
  config.topology.min_nodes = 2;
  config.topology.max_nodes = 4;
  config.topology.node_rank = 0;
  config.rdzv_backend = RdzvBackend::c10d;
  config.rdzv_endpoint = rendezvous::Endpoint{"node0", 29400};
  config.rdzv_conf.given = {{"join_timeout", "60"}, {"is_host", "true"}};
  config.signals_to_forward = {};
  LaunchFacts facts;
  facts.executable = "/work/trainer";
  facts.argv = {"trainer", "--epochs", "3"};
  facts.log_dir = "/logs/x";
  Lines lines = describe_launch_config(config, facts);
  auto has = [&](const std::string& line) { return std::find(lines.begin(), lines.end(), line) != lines.end(); };
  EXPECT_TRUE(has("  command         : trainer --epochs 3 (exec /work/trainer)"));
  EXPECT_TRUE(has("  nnodes          : 2:4"));
  EXPECT_TRUE(has("  rdzv_endpoint   : node0:29400"));
  EXPECT_TRUE(has("  rdzv_configs    : is_host=true,join_timeout=60"));
  EXPECT_TRUE(has("  master          : decided each round"));
  EXPECT_TRUE(has("  forward_signals : none"));
  for (const auto& line : lines) {
    EXPECT_EQ(line.find("interpreter"), std::string::npos) << "an executable has no interpreter";
    EXPECT_EQ(line.find("gpus"), std::string::npos) << "no count was needed";
  }
}

TEST(DescribeAttemptStart, Table) {
  EXPECT_EQ(describe_attempt_start(0, 0, 0, 4), "attempt 0: starting 4 workers");
  EXPECT_EQ(describe_attempt_start(0, 0, 3, 1), "attempt 0: starting 1 worker");
  EXPECT_EQ(describe_attempt_start(2, 2, 3, 8), "attempt 2: starting 8 workers (restart 2 of 3)");
}

TEST(DescribeWorkerStart, NamesRanksPidAndCommand) {
  EXPECT_EQ(describe_worker_start(1, 5, 4242, {"/usr/bin/python3", "-u", "train.py", "--lr", "0.1"}),
            "started local rank 1 (rank 5), pid 4242: /usr/bin/python3 -u train.py --lr 0.1");
}

}  // namespace
}  // namespace ddprun::launcher

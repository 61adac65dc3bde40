// Issue 11, items 7 and 10: workers of a static multi-node job use node 0's agent store on
// --master-port (torchrun's behaviour), each attempt under PyTorch's "/worker/attempt_<n>" prefix,
// and a node waiting for the others says so every few seconds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "../support/free_port.hpp"
#include "harness.hpp"
#include "multinode_support.hpp"

using namespace ddprun::testing;
using namespace std::chrono_literals;

namespace {

constexpr auto kJobBound = std::chrono::seconds(150);

bool system_python_has_torch() {
  std::string command = std::string(kSystemPython) + " -c 'import torch.distributed' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

std::vector<std::string> static_node(int node_rank, int port, int nproc) {
  return {"--nnodes=2",
          "--node_rank=" + std::to_string(node_rank),
          "--master_addr=127.0.0.1",
          "--master_port=" + std::to_string(port),
          "--nproc_per_node=" + std::to_string(nproc),
          "--rdzv_conf=timeout=90,read_timeout=30"};
}

/// A PyTorch worker (Debian's torch, env:// and gloo): records its environment in
/// DIR/env_<RANK>_<TORCHELASTIC_RESTART_COUNT>, all_reduces RANK+1 and writes the sum to
/// DIR/sum_<RANK>_<n>. With `fail_rank` >= 0, that rank exits 3 in attempt 0 after its all_reduce
/// (its keys are in the store by then). Rank 0 of a later attempt records whether attempt 0's keys
/// are still in the store (DIR/old_keys_<n>: "present" or "gone").
std::string torch_worker(const TempDir& dir, int fail_rank) {
  auto script = dir.path() / "worker.py";
  std::ofstream(script) << R"PY(import os, sys, datetime
import torch, torch.distributed as dist
d = sys.argv[1]; fail_rank = int(sys.argv[2])
rank = int(os.environ["RANK"]); attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
with open(f"{d}/env_{rank}_{attempt}", "w") as f:
    for k, v in os.environ.items(): f.write(f"{k}={v}\n")
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
with open(f"{d}/sum_{rank}_{attempt}", "w") as f: f.write(str(int(t.item())))
if rank == 0 and attempt != "0":
    raw = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                        timeout=datetime.timedelta(seconds=10))
    def present(key):  # 1.13's Python TCPStore has no check()
        try:
            raw.wait([key], datetime.timedelta(seconds=1))
            return True
        except RuntimeError:
            return False
    old = present("/worker/attempt_0/default_pg/store_based_barrier_key:1")
    new = present(f"/worker/attempt_{attempt}/default_pg/store_based_barrier_key:1")
    with open(f"{d}/old_keys_{attempt}", "w") as f: f.write(("present" if old else "gone") + ("" if new else " (new missing)"))
dist.barrier()
if rank == fail_rank and attempt == "0":
    sys.exit(3)
dist.destroy_process_group()
)PY";
  return write_script(dir, "torch_worker",
                      std::string("exec ") + kSystemPython + " -u \"" + script.string() + "\" \"" + dir.str() + "\" " +
                          std::to_string(fail_rank) + "\n");
}

std::vector<std::pair<std::string, Outcome>> run_two(const std::vector<std::string>& node0,
                                                     const std::vector<std::string>& node1) {
  Launch a(node0);
  Launch b(node1);
  std::vector<std::pair<std::string, Outcome>> outcomes;
  outcomes.emplace_back("node 0", a.wait(kJobBound));
  outcomes.emplace_back("node 1", b.wait(kJobBound));
  return outcomes;
}

void expect_succeeded(const std::vector<std::pair<std::string, Outcome>>& outcomes) {
  for (const auto& [name, outcome] : outcomes) EXPECT_EQ(outcome.exit_status, 0) << all_output(outcomes);
}

}  // namespace

TEST(WorkerStore, StaticPyTorchWorkersUseTheAgentStoreOnTheMasterPort) {
  if (!system_python_has_torch()) GTEST_SKIP() << kSystemPython << " cannot import torch (python3-torch missing)";
  TempDir dir;
  std::string worker = torch_worker(dir, -1);
  int port = free_port();
  auto outcomes = run_two(concat(static_node(0, port, 2), {worker}), concat(static_node(1, port, 2), {worker}));
  expect_succeeded(outcomes);
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    auto env = parse_env_file(dir.path() / ("env_" + std::to_string(rank) + "_0"));
    EXPECT_EQ(env["MASTER_PORT"], std::to_string(port));
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "True");
    EXPECT_EQ(read_file(dir.path() / ("sum_" + std::to_string(rank) + "_0")), "10") << all_output(outcomes);
  }
}

TEST(WorkerStore, RestartedAttemptGetsANewPrefixAndTheOldKeysGo) {
  if (!system_python_has_torch()) GTEST_SKIP() << kSystemPython << " cannot import torch (python3-torch missing)";
  TempDir dir;
  std::string worker = torch_worker(dir, 3);  // rank 3 (node 1) fails after attempt 0's all_reduce
  int port = free_port();
  auto outcomes = run_two(concat(static_node(0, port, 2), {"--max_restarts=1", worker}),
                          concat(static_node(1, port, 2), {"--max_restarts=1", worker}));
  expect_succeeded(outcomes);
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    auto env = parse_env_file(dir.path() / ("env_" + std::to_string(rank) + "_1"));
    EXPECT_EQ(env["MASTER_PORT"], std::to_string(port));
    EXPECT_EQ(read_file(dir.path() / ("sum_" + std::to_string(rank) + "_1")), "10") << all_output(outcomes);
  }
  EXPECT_EQ(read_file(dir.path() / "sum_3_0"), "10") << "rank 3 should have failed after attempt 0's all_reduce";
  EXPECT_EQ(read_file(dir.path() / "old_keys_1"), "gone") << all_output(outcomes);
}

TEST(WorkerStore, FreshStoreStillWorks) {
  if (!system_python_has_torch()) GTEST_SKIP() << kSystemPython << " cannot import torch (python3-torch missing)";
  TempDir dir;
  std::string worker = torch_worker(dir, -1);
  int port = free_port();
  auto outcomes = run_two(concat(static_node(0, port, 1), {"--worker-store=fresh", worker}),
                          concat(static_node(1, port, 1), {"--worker-store=fresh", worker}));
  expect_succeeded(outcomes);
  for (int rank = 0; rank < 2; ++rank) {
    auto env = parse_env_file(dir.path() / ("env_" + std::to_string(rank) + "_0"));
    EXPECT_NE(env["MASTER_PORT"], std::to_string(port)) << "a fresh store has a port of its own";
    EXPECT_EQ(read_file(dir.path() / ("sum_" + std::to_string(rank) + "_0")), "3") << all_output(outcomes);
  }
}

TEST(WorkerStore, NodesThatDisagreeOnTheWorkerStoreAreTold) {
  int port = free_port();
  auto outcomes = run_two(concat(static_node(0, port, 1), {"/bin/true"}),
                          concat(static_node(1, port, 1), {"--worker-store=fresh", "/bin/true"}));
  EXPECT_NE(outcomes[1].second.exit_status, 0) << all_output(outcomes);
  EXPECT_NE(outcomes[1].second.err.find("--worker-store"), std::string::npos) << all_output(outcomes);
}

TEST(WorkerStore, PlainSgdOverTheAgentStore) {
  TempDir dir;
  std::string sgd = plain_sgd_binary();
  for (const auto& arg : plain_sgd_args()) sgd += " " + arg;
  // Records MASTER_PORT, then is plain_sgd (ddprun::runtime, gloo).
  std::string worker = write_script(dir, "sgd", "echo \"$MASTER_PORT\" > \"" + dir.str() + "/port_$RANK\"\nexec " + sgd + "\n");
  int port = free_port();
  auto outcomes = run_two(concat(static_node(0, port, 2), {"--max_restarts=1", worker}),
                          concat(static_node(1, port, 2), {"--max_restarts=1", worker}));
  expect_succeeded(outcomes);
  EXPECT_EQ(plain_sgd_missing(outcomes[0].second.out, 4), "") << all_output(outcomes);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(read_file(dir.path() / ("port_" + std::to_string(rank))), std::to_string(port) + "\n");
  }
}

TEST(WaitingLine, NodeZeroSaysWhoItWaitsFor) {
  TempDir dir;
  int port = free_port();
  const std::string err0 = (dir.path() / "node0.err").string();
  auto node_argv = [&](int rank) {
    std::string command = "exec \"" + ddprun_binary() + "\"";
    for (const auto& arg : concat(static_node(rank, port, 1), {"-v", "/bin/true"})) command += " '" + arg + "'";
    return command;
  };
  Launch node0(Launch::Command{{"/bin/sh", "-c", node_argv(0) + " 2>'" + err0 + "'"}});
  const std::string expected = "ddprun: waiting for 1 more node: 1 of 2 joined, ";
  bool told = eventually([&] { return read_file(err0).find(expected) != std::string::npos; }, 12s);
  EXPECT_TRUE(told) << "node 0's stderr after 12 s:\n" << read_file(err0);
  EXPECT_NE(read_file(err0).find("s of 90 (missing node rank 1)"), std::string::npos) << read_file(err0);
  Launch node1(concat(static_node(1, port, 1), {"-v", "/bin/true"}));
  Outcome outcome1 = node1.wait(60s);
  Outcome outcome0 = node0.wait(60s);
  EXPECT_EQ(outcome0.exit_status, 0) << read_file(err0);
  EXPECT_EQ(outcome1.exit_status, 0) << outcome1.err;
  // -v: the rendezvous result, once per round.
  EXPECT_NE(outcome1.err.find("ddprun: rendezvous round 0: 2 nodes, this node is rank 1, world size 2, master 127.0.0.1:" +
                              std::to_string(port)),
            std::string::npos)
      << outcome1.err;
}

// ddprun as the entrypoint of a Kubeflow PyTorchJob (issue 14, item 3): the command of
// examples/kubernetes/*.yaml, read from the manifests themselves, with the environment the
// operator gives each pod (tests/unit/data/pytorchjob/: written from training-operator v1.9.0's
// code and Trainer v2's torch plugin, each file says where from) -> the job ddprun derives, by table.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_parse.hpp"
#include "launcher/workers/worker_env.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;
namespace fs = std::filesystem;

const fs::path kSource = fs::path(__FILE__).parent_path();  // tests/unit

Environ pod_environment(const std::string& name) {
  std::ifstream in(kSource / "data" / "pytorchjob" / name);
  EXPECT_TRUE(in) << "missing test data " << name;
  Environ env = kNoPath;
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (!line.empty() && line[0] != '#' && eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

/// The arguments after "ddprun" of every container's `command: [...]` in a manifest (a YAML flow
/// sequence of quoted strings, which is JSON); they must all be the same.
Args manifest_arguments(const std::string& name) {
  std::ifstream in(kSource / ".." / ".." / "examples" / "kubernetes" / name);
  EXPECT_TRUE(in) << "missing example " << name;
  std::optional<Args> found;
  for (std::string line; std::getline(in, line);) {
    auto at = line.find("command: [");
    if (at == std::string::npos) continue;
    auto command = nlohmann::json::parse(line.substr(at + 9)).get<Args>();
    EXPECT_FALSE(command.empty());
    EXPECT_EQ(command.front(), "ddprun") << name << ": ddprun is the entrypoint";
    Args args(command.begin() + 1, command.end());
    if (found) {
      EXPECT_EQ(args, *found) << name << ": every replica runs the same command";
    }
    found = args;
  }
  EXPECT_TRUE(found) << name << " has no command";
  return found.value_or(Args{});
}

struct PodCase {
  const char* manifest;
  const char* pod;
  RdzvBackend backend;
  int min_nodes;
  int max_nodes;
  int node_rank;  ///< static only
  const char* store;  ///< where node 0's (static) or the endpoint's (c10d) store is
  int nproc;
  int max_restarts;
};

TEST(PyTorchJob, DdprunNeedsNoFlagInAnyPod) {
  const PodCase cases[] = {
      {"pytorchjob.yaml", "v1_master-0.env", RdzvBackend::static_, 2, 2, 0, "ddprun-train-master-0:23456", 2, 0},
      {"pytorchjob.yaml", "v1_worker-0.env", RdzvBackend::static_, 2, 2, 1, "ddprun-train-master-0:23456", 2, 0},
      {"pytorchjob-elastic.yaml", "v1_elastic_worker-1.env", RdzvBackend::c10d, 1, 3, 0,
       "ddprun-elastic-worker-0:23456", 2, 3},
      // Trainer v2's TrainJob: PET_NPROC_PER_NODE=auto, on a host of 8 CPUs and no GPU (kCpuHost).
      {"pytorchjob.yaml", "v2_trainjob_node-1.env", RdzvBackend::static_, 2, 2, 1, "mnist-trainer-node-0-0.mnist:29500",
       8, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.manifest) + " in " + c.pod);
    LaunchConfig config = parse(manifest_arguments(c.manifest), pod_environment(c.pod));
    EXPECT_EQ(config.rdzv_backend, c.backend);
    EXPECT_EQ(config.topology.min_nodes, c.min_nodes);
    EXPECT_EQ(config.topology.max_nodes, c.max_nodes);
    if (c.backend == RdzvBackend::static_) {
      EXPECT_EQ(config.topology.node_rank, c.node_rank);
    }
    EXPECT_TRUE(config.topology.multi_node);
    EXPECT_EQ(rendezvous::format_endpoint(config.store_endpoint.host, config.store_endpoint.port), c.store);
    EXPECT_EQ(config.topology.nproc_per_node, c.nproc);
    EXPECT_EQ(config.max_restarts, c.max_restarts);
    EXPECT_EQ(config.program, "/workspace/train.py");
  }
}

TEST(PyTorchJob, EachWorkerGetsItsOwnRankNotThePods) {
  // The operator's RANK and WORLD_SIZE name the pod (node 1 of a world it counts as 4); ddprun's
  // workers get their own, as torchrun's do.
  Environ pod = pod_environment("v1_worker-0.env");
  ASSERT_EQ(pod.at("RANK"), "1");
  WorkerSpec spec;
  spec.local_rank = 1;
  spec.rank = 3;
  spec.local_world_size = 2;
  spec.world_size = 4;
  spec.group_rank = 1;
  spec.group_world_size = 2;
  spec.master_addr = "ddprun-train-master-0";
  spec.master_port = 23456;
  Environ worker = build_worker_env(pod, spec);
  EXPECT_EQ(worker.at("RANK"), "3");
  EXPECT_EQ(worker.at("LOCAL_RANK"), "1");
  EXPECT_EQ(worker.at("WORLD_SIZE"), "4");
  EXPECT_EQ(worker.at("GROUP_RANK"), "1");
  EXPECT_EQ(worker.at("MASTER_ADDR"), "ddprun-train-master-0");
}

}  // namespace
}  // namespace ddprun::launcher

// launcher/slurm_env: ddprun inside a Slurm allocation, on environments recorded from real Slurm
// runs (tests/unit/data/slurm/, Debian 12's Slurm 22.05.8: each file names the command that made
// it). First what the step says, then the job ddprun derives from it with the command line, by
// table; then every refusal with its message.
#include "launcher/fleet/slurm_env.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_parse.hpp"
#include "launcher/base/errors.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

const std::filesystem::path kData = std::filesystem::path(__FILE__).parent_path() / "data" / "slurm";

/// A recorded environment: NAME=VALUE lines, '#' lines are comments; PATH as the CLI tests use.
Environ recorded(const std::string& name) {
  std::ifstream in(kData / name);
  EXPECT_TRUE(in) << "missing test data " << (kData / name);
  Environ env = kNoPath;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

struct StepCase {
  const char* file;
  bool in_step;
  int nodes;
  int node_id;
  std::vector<std::string> hosts;
  int tasks_here;
  std::vector<std::string> gpus;
};

TEST(SlurmStep, ReadsWhatRealSlurmSet) {
  const StepCase cases[] = {
      {"srun_N2_node1.env", true, 2, 0, {"node1", "node2"}, 1, {}},
      {"srun_N2_node2.env", true, 2, 1, {"node1", "node2"}, 1, {}},
      // A 1-node step on the allocation's second node: SLURM_JOB_NODELIST and SLURM_NODELIST still
      // say node[1-2]; only SLURM_STEP_NODELIST names the step's host.
      {"salloc_N2_srun_w_node2.env", true, 1, 0, {"node2"}, 1, {}},
      {"salloc_N2_shell.env", false, 2, 0, {"node1", "node2"}, 1, {}},
      {"sbatch_N2_batch.env", false, 2, 0, {"node1", "node2"}, 1, {}},
      {"srun_N2_n2_node1_0.env", true, 2, 0, {"node1", "node2"}, 2, {}},
      {"srun_N2_gpus2_node2.env", true, 2, 1, {"node1", "node2"}, 1, {"0", "1"}},
      {"sbatch_gpu_batch.env", false, 1, 0, {"node1"}, 1, {"0", "1"}},
      {"sbatch_gpu2_step_gres1.env", true, 1, 0, {"node1"}, 1, {"0"}},  // SLURM_STEP_GPUS, not SLURM_JOB_GPUS=0,1
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    auto step = read_slurm_step(recorded(c.file));
    ASSERT_TRUE(step);
    EXPECT_FALSE(step->job_id.empty());
    EXPECT_EQ(step->in_step, c.in_step);
    EXPECT_EQ(step->nodes, c.nodes);
    EXPECT_EQ(step->node_id, c.node_id);
    EXPECT_EQ(step->hosts, c.hosts);
    EXPECT_EQ(step->tasks_here, c.tasks_here);
    EXPECT_EQ(step->gpus, c.gpus);
  }
  EXPECT_FALSE(read_slurm_step(kNoPath)) << "outside an allocation, nothing";
}

/// The job ddprun makes of a recorded environment and a command line.
struct JobCase {
  const char* file;
  Args args;
  int nnodes;
  int node_rank;
  const char* master_addr;
  int master_port;
  const char* run_id;
  int nproc;
};

TEST(SlurmStep, StandsInForTheFlagsLeftOut) {
  const JobCase cases[] = {
      // The command: srun --ntasks-per-node=1 ddprun --nproc-per-node=N train.py, no other flag.
      {"srun_N2_node1.env", {"--nproc-per-node=4", "train.py"}, 2, 0, "node1", 29502, "2", 4},
      {"srun_N2_node2.env", {"--nproc-per-node=4", "train.py"}, 2, 1, "node1", 29502, "2", 4},
      // The step's first host is node 0, not the allocation's.
      {"salloc_N2_srun_w_node2.env", {"train.py"}, 1, 0, "127.0.0.1", 29503, "3", 1},
      // The GPUs Slurm gave the step are the default worker count; an explicit count wins.
      {"srun_N2_gpus2_node2.env", {"train.py"}, 2, 1, "node1", 29507, "7", 2},
      {"srun_N2_gpus2_node2.env", {"--nproc-per-node", "1", "train.py"}, 2, 1, "node1", 29507, "7", 1},
      {"sbatch_gpu2_step_gres1.env", {"train.py"}, 1, 0, "127.0.0.1", 29509, "9", 1},
      {"sbatch_gpu_batch.env", {"train.py"}, 1, 0, "127.0.0.1", 29509, "9", 2},
      // Explicit values win where they state a choice, not a fact of the step.
      {"srun_N2_node2.env", {"--master-addr", "10.1.2.3", "--master-port", "4000", "--rdzv-id", "mine", "t.py"},
       2, 1, "10.1.2.3", 4000, "mine", 1},
      // Values that agree with the step are fine, a --nnodes range too.
      {"srun_N2_node2.env", {"--nnodes", "2", "--node-rank", "1", "t.py"}, 2, 1, "node1", 29502, "2", 1},
      // A batch script or an salloc shell of several nodes runs ddprun on this node alone when told to.
      {"sbatch_N2_batch.env", {"--nnodes", "1", "t.py"}, 1, 0, "127.0.0.1", 29506, "6", 1},
      // --standalone: one node on its own; Slurm stays out (its random run id, its own port).
      {"srun_N2_n2_node1_0.env", {"--standalone", "t.py"}, 1, 0, "127.0.0.1", 29500, nullptr, 1},
      // --hostfile / -H: agents over ssh, each told its place; from a 2-node salloc shell too.
      {"salloc_N2_shell.env", {"-H", "10.0.0.1:1,10.0.0.2:1", "t.py"}, 2, 0, "10.0.0.1", 29500, "none", 1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.file) + ": " + joined(c.args));
    LaunchConfig config = parse(c.args, recorded(c.file));
    EXPECT_EQ(config.topology.min_nodes, c.nnodes);
    EXPECT_EQ(config.topology.max_nodes, c.nnodes);
    EXPECT_EQ(config.topology.node_rank, c.node_rank);
    EXPECT_EQ(config.master_addr, c.master_addr);
    EXPECT_EQ(config.master_port, c.master_port);
    if (c.run_id) {
      EXPECT_EQ(config.rdzv_id, c.run_id);
    }
    EXPECT_EQ(config.topology.nproc_per_node, c.nproc);
    EXPECT_EQ(config.topology.multi_node, c.nnodes > 1);
    if (c.nnodes > 1) {
      EXPECT_EQ(config.store_endpoint.host, c.master_addr);
    }
  }
}

TEST(SlurmStep, NnodesRangeAndC10dTakeTheNodeCountOnly) {
  Environ env = recorded("srun_N2_node2.env");
  LaunchConfig range = parse({"--nnodes", "1:4", "t.py"}, env);
  EXPECT_EQ(range.topology.min_nodes, 1);
  EXPECT_EQ(range.topology.max_nodes, 4);
  EXPECT_EQ(range.topology.node_rank, 1);
  LaunchConfig c10d = parse({"--rdzv-backend", "c10d", "--rdzv-endpoint", "node1:29400", "t.py"}, env);
  EXPECT_EQ(c10d.topology.max_nodes, 2);
  EXPECT_EQ(c10d.rdzv_id, "2");
  EXPECT_EQ(c10d.master_addr, "127.0.0.1") << "c10d meets at its endpoint; Slurm's first host is not used";
}

struct RefusalCase {
  const char* file;
  Args args;
  Environ extra;  ///< set on top of the recorded environment
  const char* message;
};

TEST(SlurmStep, RefusesWithWhatToDoInstead) {
  const RefusalCase cases[] = {
      {"srun_N2_node2.env", {"--nnodes", "3", "t.py"}, {},
       "--nnodes: \"3\" contradicts Slurm: this srun step runs on 2 nodes (SLURM_STEP_NUM_NODES=2); leave --nnodes "
       "out, or give srun -N to match"},
      {"srun_N2_node2.env", {"t.py"}, {{"PET_NNODES", "3:4"}},
       "--nnodes (from PET_NNODES): \"3:4\" contradicts Slurm: this srun step runs on 2 nodes"},
      {"srun_N2_node2.env", {"--node-rank", "0", "t.py"}, {},
       "--node-rank: \"0\" contradicts Slurm, which runs this ddprun as node 1 of the step (SLURM_NODEID=1); leave "
       "--node-rank out"},
      {"srun_N2_n2_node1_0.env", {"--nproc-per-node", "2", "t.py"}, {},
       "SLURM_STEP_TASKS_PER_NODE=2(x2): srun started 2 tasks on this node, each a ddprun that would start workers "
       "of its own; ddprun starts the node's workers itself: run one per node, `srun --ntasks-per-node=1 ddprun "
       "--nproc-per-node=2 ...`"},
      {"sbatch_N2_batch.env", {"t.py"}, {},
       "SLURM_JOB_NUM_NODES=2: ddprun was started outside srun in a Slurm allocation of 2 nodes (a batch script or "
       "an salloc shell runs on the first node only), so the other nodes would never join; start one ddprun on "
       "every node with `srun --ntasks-per-node=1 ddprun ...`, or pass --nnodes 1 to use this node alone"},
      {"salloc_N2_shell.env", {"t.py"}, {}, "SLURM_JOB_NUM_NODES=2: ddprun was started outside srun"},
      {"srun_N2_node2.env", {"t.py"}, {{"SLURM_STEP_NODELIST", "node[1-2"}},
       "SLURM_STEP_NODELIST=node[1-2: unbalanced '[' in \"node[1-2\""},
      {"srun_N2_node2.env", {"t.py"}, {{"SLURM_STEP_NODELIST", "node[1-3]"}},
       "SLURM_STEP_NODELIST=node[1-3]: names 3 host(s), but SLURM_STEP_NUM_NODES=2"},
      {"srun_N2_node2.env", {"t.py"}, {{"SLURM_NODEID", "2"}}, "SLURM_NODEID=2: is not below SLURM_STEP_NUM_NODES=2"},
      {"srun_N2_node2.env", {"t.py"}, {{"SLURM_STEP_NUM_NODES", "two"}},
       "SLURM_STEP_NUM_NODES=two: is not an integer >= 1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.file) + ": " + joined(c.args));
    Environ env = recorded(c.file);
    for (const auto& [name, value] : c.extra) env[name] = value;
    std::string message = usage_error(c.args, env);
    EXPECT_TRUE(message.starts_with(c.message)) << message;
  }
}

TEST(SlurmStep, ANodeListMissingIsOnlyAnErrorWhereNode0MustBeFound) {
  Environ env = recorded("srun_N2_node2.env");
  env.erase("SLURM_STEP_NODELIST");
  env.erase("SLURM_JOB_NODELIST");
  env.erase("SLURM_NODELIST");
  EXPECT_TRUE(usage_error({"t.py"}, env).starts_with("SLURM_STEP_NODELIST is not set")) << usage_error({"t.py"}, env);
  EXPECT_EQ(parse({"--master-addr", "head", "t.py"}, env).master_addr, "head");
}

}  // namespace
}  // namespace ddprun::launcher

// ddprun under a real Slurm (Debian's slurmctld, slurmd and munge, started by the test: see
// slurm_cluster.hpp): `srun --ntasks-per-node=1 ddprun --nproc-per-node=N PROGRAM` and no other
// flag, on one node of this machine and on two nodes that are network, UTS and mount namespaces
// with their own hostnames. Needs root; skips, with the reason, where a piece cannot start.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "harness.hpp"
#include "multinode_support.hpp"
#include "netns_lab.hpp"
#include "slurm_cluster.hpp"

using namespace ddprun::testing;
using namespace std::chrono_literals;

namespace {

constexpr auto kJobBound = std::chrono::seconds(150);

#define START_LOCAL_SLURM(cluster)                                \
  std::string why_not;                                            \
  auto cluster = SlurmCluster::start_local(why_not);              \
  if (!cluster) GTEST_SKIP() << "no Slurm here: " << why_not

/// A worker that prints what ddprun and Slurm told it, then trains with plain_sgd.
std::string reporting_worker(const TempDir& dir) {
  std::string sgd = plain_sgd_binary();
  for (const auto& arg : plain_sgd_args()) sgd += " " + arg;
  return write_script(dir, "reporting_worker",
                      "echo \"worker: rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK group=$GROUP_RANK "
                      "master=$MASTER_ADDR:$MASTER_PORT run=$TORCHELASTIC_RUN_ID job=$SLURM_JOB_ID "
                      "host=$(hostname) gpus=$CUDA_VISIBLE_DEVICES\"\n"
                      "exec " + sgd + "\n");
}

std::string describe(const Outcome& outcome, const SlurmCluster& cluster) {
  std::string text = "exit " + std::to_string(outcome.exit_status) + "\n---- stdout:\n" + outcome.out +
                     "---- stderr:\n" + outcome.err;
  if (outcome.exit_status != 0 || std::getenv("DDPRUN_TEST_VERBOSE") != nullptr) text += cluster.logs();
  return text;
}

/// `srun`'s outcome; with DDPRUN_TEST_VERBOSE set, shown also when the test passes.
Outcome finish(Launch& launch, const SlurmCluster& cluster) {
  Outcome outcome = launch.wait(kJobBound);
  if (std::getenv("DDPRUN_TEST_VERBOSE") != nullptr) std::cout << describe(outcome, cluster) << "\n";
  return outcome;
}

/// The value of `key=` in the first line of `out` that holds `prefix`; "" when none does.
std::string field(const std::string& out, const std::string& prefix, const std::string& key) {
  for (const auto& line : split_lines(out)) {
    if (line.find(prefix) == std::string::npos) continue;
    auto at = line.find(" " + key + "=");
    if (at == std::string::npos) continue;
    auto start = at + key.size() + 2;
    return line.substr(start, line.find(' ', start) - start);
  }
  return "";
}

TEST(SlurmLocal, OneSrunTaskRunsTheNodesWorkersWithWhatSlurmSet) {
  START_LOCAL_SLURM(cluster);
  TempDir dir;
  Launch srun(Launch::Command{cluster->client({"srun", "-N1", "--ntasks-per-node=1", ddprun_binary(),
                                               "--nproc-per-node", "2", reporting_worker(dir)})});
  Outcome outcome = finish(srun, *cluster);
  ASSERT_EQ(outcome.exit_status, 0) << describe(outcome, *cluster);
  EXPECT_EQ(plain_sgd_missing(outcome.out, 2), "") << describe(outcome, *cluster);
  // Slurm's job id is the run id, and picks the port: 29500 + id % 1000.
  const std::string job = field(outcome.out, "worker: rank=0 ", "job");
  ASSERT_FALSE(job.empty()) << describe(outcome, *cluster);
  EXPECT_EQ(field(outcome.out, "worker: rank=0 ", "run"), job);
  EXPECT_EQ(field(outcome.out, "worker: rank=0 ", "master"), "127.0.0.1:" + std::to_string(29500 + std::stoi(job) % 1000));
  EXPECT_EQ(field(outcome.out, "worker: rank=1 ", "world"), "2");
}

TEST(SlurmLocal, SeveralTasksOnANodeSayWhatToRunInstead) {
  START_LOCAL_SLURM(cluster);
  Launch srun(Launch::Command{cluster->client({"srun", "-N1", "--ntasks-per-node=2", ddprun_binary(),
                                               "--nproc-per-node", "1", plain_sgd_binary()})});
  Outcome outcome = finish(srun, *cluster);
  EXPECT_NE(outcome.exit_status, 0) << describe(outcome, *cluster);
  EXPECT_NE(outcome.err.find("srun started 2 tasks on this node"), std::string::npos) << describe(outcome, *cluster);
  EXPECT_NE(outcome.err.find("srun --ntasks-per-node=1 ddprun --nproc-per-node=2"), std::string::npos)
      << describe(outcome, *cluster);
  EXPECT_EQ(outcome.out.find("plain_sgd: rank"), std::string::npos) << "no worker may start";
}

TEST(SlurmLocal, AContradictingFlagIsAUsageError) {
  START_LOCAL_SLURM(cluster);
  Launch srun(Launch::Command{cluster->client({"srun", "-N1", "--ntasks-per-node=1", ddprun_binary(), "--nnodes", "2",
                                               "--nproc-per-node", "1", plain_sgd_binary()})});
  Outcome outcome = finish(srun, *cluster);
  EXPECT_EQ(outcome.exit_status, 2) << describe(outcome, *cluster);
  EXPECT_NE(outcome.err.find("--nnodes: \"2\" contradicts Slurm: this srun step runs on 1 node"), std::string::npos)
      << describe(outcome, *cluster);
}

/// Processes whose environment holds SLURM_CONF=`conf`: the cluster's daemons, steps and tasks.
std::vector<std::string> processes_of(const std::string& conf) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    for (std::string variable; std::getline(in, variable, '\0');) {
      if (variable == "SLURM_CONF=" + conf) {
        found.push_back(pid + " " + read_file(entry.path() / "comm"));
        break;
      }
    }
  }
  return found;
}

TEST(SlurmLocal, NothingOfTheClusterOutlivesIt) {
  // A step still running when the test ends (a test that failed half-way) goes with the cluster.
  START_LOCAL_SLURM(cluster);
  const std::string conf = cluster->folder() + "/slurm.conf";
  Launch srun(Launch::Command{cluster->client({"srun", "-N1", "sleep", "600"})});
  ASSERT_TRUE(eventually([&] {
    for (const auto& process : processes_of(conf)) {
      if (process.find(" sleep") != std::string::npos) return true;
    }
    return false;
  })) << cluster->logs();
  cluster.reset();
  EXPECT_EQ(processes_of(conf), std::vector<std::string>{});
  Outcome outcome = srun.wait(std::chrono::seconds(20));
  EXPECT_NE(outcome.exit_status, 0) << "srun was ended with its step";
}

#define START_LAB_SLURM_WITH_GPUS(lab, cluster, compute_nodes, gpus)  \
  std::string why_not;                                                \
  auto lab = NetnsLab::create((compute_nodes) + 1, why_not);          \
  if (!lab) GTEST_SKIP() << why_not;                                  \
  auto cluster = SlurmCluster::start_in_lab(*lab, why_not, gpus);     \
  if (!cluster) GTEST_SKIP() << "no Slurm in the lab: " << why_not
#define START_LAB_SLURM(lab, cluster, compute_nodes) START_LAB_SLURM_WITH_GPUS(lab, cluster, compute_nodes, 0)

TEST(SlurmLab, TwoNodeSrunTrainsWithNoOtherFlag) {
  START_LAB_SLURM(lab, cluster, 2);
  TempDir dir;
  Launch srun(Launch::Command{cluster->client({"srun", "-N2", "--ntasks-per-node=1", ddprun_binary(),
                                               "--nproc-per-node", "2", reporting_worker(dir)})});
  Outcome outcome = finish(srun, *cluster);
  ASSERT_EQ(outcome.exit_status, 0) << describe(outcome, *cluster);
  EXPECT_EQ(plain_sgd_missing(outcome.out, 4), "") << describe(outcome, *cluster);
  // Node 0 is the step's first host, and each node has its own name.
  const std::string job = field(outcome.out, "worker: rank=0 ", "job");
  ASSERT_FALSE(job.empty()) << describe(outcome, *cluster);
  EXPECT_EQ(field(outcome.out, "worker: rank=0 ", "master"), "dsn1:" + std::to_string(29500 + std::stoi(job) % 1000));
  EXPECT_EQ(field(outcome.out, "worker: rank=0 ", "host"), "dsn1");
  EXPECT_EQ(field(outcome.out, "worker: rank=3 ", "host"), "dsn2");
  EXPECT_EQ(field(outcome.out, "worker: rank=3 ", "group"), "1");
  EXPECT_EQ(field(outcome.out, "worker: rank=3 ", "run"), job);
}

TEST(SlurmLab, AStepOnTheSecondNodeMakesItNode0) {
  // salloc -N2, then a step on its second node only: SLURM_JOB_NODELIST still names dsn1 first.
  START_LAB_SLURM(lab, cluster, 2);
  TempDir dir;
  Launch salloc(Launch::Command{cluster->client({"salloc", "-N2", "srun", "-N1", "-w", "dsn2", "--ntasks-per-node=1",
                                                 ddprun_binary(), "--nproc-per-node", "2", reporting_worker(dir)})});
  Outcome outcome = finish(salloc, *cluster);
  ASSERT_EQ(outcome.exit_status, 0) << describe(outcome, *cluster);
  EXPECT_EQ(plain_sgd_missing(outcome.out, 2), "") << describe(outcome, *cluster);
  EXPECT_EQ(field(outcome.out, "worker: rank=0 ", "host"), "dsn2");
}

TEST(SlurmLab, DdprunOutsideSrunInATwoNodeAllocationSaysWhatToDo) {
  START_LAB_SLURM(lab, cluster, 2);
  Launch salloc(Launch::Command{cluster->client({"salloc", "-N2", ddprun_binary(), "--nproc-per-node", "1",
                                                 plain_sgd_binary()})});
  Outcome outcome = finish(salloc, *cluster);
  EXPECT_NE(outcome.exit_status, 0) << describe(outcome, *cluster);
  EXPECT_NE(outcome.err.find("ddprun was started outside srun in a Slurm allocation of 2 nodes"), std::string::npos)
      << describe(outcome, *cluster);
  EXPECT_NE(outcome.err.find("srun --ntasks-per-node=1 ddprun"), std::string::npos) << describe(outcome, *cluster);
}

TEST(SlurmLab, TheSbatchExampleTrainsOneWorkerPerGpuOfTheStep) {
  // examples/slurm/train.sbatch as a user submits it, with this lab's sizes: 2 nodes of 2 GPUs
  // (Slurm's gres/gpu), ddprun from this build on PATH. No --nproc-per-node: the step's GPUs.
  START_LAB_SLURM_WITH_GPUS(lab, cluster, 2, 2);
  TempDir dir;
  const std::string path = std::filesystem::path(ddprun_binary()).parent_path().string() + ":" + std::getenv("PATH");
  const std::string output = dir.str() + "/job.out";
  Launch sbatch(Launch::Command{cluster->client({"PATH=" + path, "sbatch", "--wait", "--gpus-per-node=2",
                                                 "--output=" + output, "--chdir=" + dir.str(),
                                                 examples_dir() + "/slurm/train.sbatch", reporting_worker(dir)})});
  Outcome outcome = finish(sbatch, *cluster);
  outcome.out += "---- job.out:\n" + read_file(output);
  ASSERT_EQ(outcome.exit_status, 0) << describe(outcome, *cluster);
  EXPECT_EQ(plain_sgd_missing(outcome.out, 4), "") << describe(outcome, *cluster);
  EXPECT_EQ(field(outcome.out, "worker: rank=0 ", "host"), "dsn1");
  EXPECT_EQ(field(outcome.out, "worker: rank=3 ", "host"), "dsn2");
  EXPECT_EQ(field(outcome.out, "worker: rank=3 ", "gpus"), "0,1") << "Slurm's CUDA_VISIBLE_DEVICES, inherited";
}

}  // namespace

// The who-am-I matrix: each launcher's variables, the store address they imply, and the errors
// that name the variable to fix.
#include "ddprun/identity.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "ddprun/error.hpp"

namespace ddprun {
namespace {

using Env = std::map<std::string, std::string>;

/// The message of the Error identity_from throws for `env`; fails the test when none is thrown.
std::string error_of(const Env& env) {
  try {
    identity_from(env);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ddprun::Error thrown";
  return {};
}

Env torchrun_env() {
  return {{"RANK", "5"},         {"WORLD_SIZE", "8"},          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29501"},
          {"TORCHELASTIC_RUN_ID", "job7"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
          {"TORCHELASTIC_RESTART_COUNT", "2"}};
}

TEST(Identity, NoLauncherIsAWorldOfOne) {
  Identity id = identity_from({});
  EXPECT_EQ(id.launcher, Launcher::none);
  EXPECT_EQ(id.rank, 0);
  EXPECT_EQ(id.world_size, 1);
  EXPECT_EQ(id.local_rank, 0);
  EXPECT_EQ(id.local_world_size, 1);
  EXPECT_EQ(id.master_addr, "127.0.0.1");
  EXPECT_EQ(id.master_port, 29500);
  EXPECT_FALSE(id.agent_store);
  EXPECT_EQ(id.run_id, "none");
  EXPECT_EQ(launcher_name(id.launcher), "none");
}

TEST(Identity, NoLauncherTakesMasterOverride) {
  Identity id = identity_from({{"MASTER_ADDR", "10.0.0.9"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(id.launcher, Launcher::none);
  EXPECT_EQ(id.master_addr, "10.0.0.9");
  EXPECT_EQ(id.master_port, 1234);
}

TEST(Identity, Torchrun) {
  Identity id = identity_from(torchrun_env());
  EXPECT_EQ(id.launcher, Launcher::torchrun);
  EXPECT_EQ(launcher_name(id.launcher), "torchrun");
  EXPECT_EQ(id.rank, 5);
  EXPECT_EQ(id.world_size, 8);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.local_world_size, 4);
  EXPECT_EQ(id.master_addr, "node0");
  EXPECT_EQ(id.master_port, 29501);
  EXPECT_TRUE(id.agent_store);
  EXPECT_EQ(id.restart_count, 2);
  EXPECT_EQ(id.run_id, "job7");
}

TEST(Identity, AgentStoreOnlyForPythonsTrueSpelling) {
  Env env = torchrun_env();
  for (const char* value : {"False", "true", "1", ""}) {
    env["TORCHELASTIC_USE_AGENT_STORE"] = value;
    EXPECT_FALSE(identity_from(env).agent_store) << value;
  }
  env.erase("TORCHELASTIC_USE_AGENT_STORE");
  EXPECT_FALSE(identity_from(env).agent_store);
}

TEST(Identity, HandMadeEnvInitIsOneNodeWithDefaults) {
  Identity id = identity_from({{"RANK", "2"}, {"WORLD_SIZE", "3"}});
  EXPECT_EQ(id.launcher, Launcher::torchrun);
  EXPECT_EQ(id.local_rank, 2);
  EXPECT_EQ(id.local_world_size, 3);
  EXPECT_EQ(id.master_addr, "127.0.0.1");
  EXPECT_EQ(id.master_port, 29500);
  EXPECT_FALSE(id.agent_store);
}

TEST(Identity, TorchrunMissingVariablesAreNamed) {
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    Env env = torchrun_env();
    env.erase(name);
    EXPECT_NE(error_of(env).find(std::string(name) + " is not set"), std::string::npos) << name << ": " << error_of(env);
  }
  EXPECT_NE(error_of({{"RANK", "0"}}).find("WORLD_SIZE is not set"), std::string::npos);
  EXPECT_NE(error_of({{"WORLD_SIZE", "2"}}).find("RANK is not set"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}).find("LOCAL_WORLD_SIZE is not set"),
            std::string::npos);
}

TEST(Identity, TorchrunInconsistentOrMalformedValuesAreNamed) {
  struct Case {
    const char* name;
    const char* value;
    const char* expected;
  };
  for (const Case& c : {Case{"RANK", "8", "RANK=8 is out of range: expected 0 <= RANK < WORLD_SIZE=8"},
                        Case{"RANK", "-1", "RANK=-1 is not a non-negative integer"},
                        Case{"RANK", "one", "RANK=one is not a non-negative integer"},
                        Case{"RANK", " 1", "RANK= 1 is not a non-negative integer"},
                        Case{"WORLD_SIZE", "0", "WORLD_SIZE=0 must be at least 1"},
                        Case{"LOCAL_RANK", "4", "LOCAL_RANK=4 is out of range"},
                        Case{"LOCAL_WORLD_SIZE", "9", "LOCAL_WORLD_SIZE=9 is out of range"},
                        Case{"MASTER_PORT", "70000", "MASTER_PORT=70000 is not a port number"},
                        Case{"MASTER_PORT", "0", "MASTER_PORT=0 is not a port number"},
                        Case{"MASTER_ADDR", "", "MASTER_ADDR is set but empty"},
                        Case{"TORCHELASTIC_RESTART_COUNT", "x", "TORCHELASTIC_RESTART_COUNT=x"}}) {
    Env env = torchrun_env();
    env[c.name] = c.value;
    EXPECT_NE(error_of(env).find(c.expected), std::string::npos) << c.name << "=" << c.value << ": " << error_of(env);
  }
}

Env open_mpi_env() {
  return {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
}

TEST(Identity, OpenMpiOneNode) {
  Identity id = identity_from(open_mpi_env());
  EXPECT_EQ(id.launcher, Launcher::open_mpi);
  EXPECT_EQ(launcher_name(id.launcher), "Open MPI");
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(id.world_size, 4);
  EXPECT_EQ(id.local_rank, 3);
  EXPECT_EQ(id.local_world_size, 4);
  EXPECT_EQ(id.master_addr, "127.0.0.1");
  EXPECT_EQ(id.master_port, 29500);
  EXPECT_FALSE(id.agent_store);  // rank 0 hosts the store
}

TEST(Identity, OpenMpiAcrossNodesNeedsMasterAddr) {
  Env env = open_mpi_env();
  env["OMPI_COMM_WORLD_LOCAL_RANK"] = "1";
  env["OMPI_COMM_WORLD_LOCAL_SIZE"] = "2";
  EXPECT_NE(error_of(env).find("MASTER_ADDR is not set"), std::string::npos) << error_of(env);
  env["MASTER_ADDR"] = "head";
  Identity id = identity_from(env);
  EXPECT_EQ(id.master_addr, "head");
  EXPECT_EQ(id.local_world_size, 2);
}

TEST(Identity, OpenMpiMissingAndInconsistent) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    Env env = open_mpi_env();
    env.erase(name);
    EXPECT_NE(error_of(env).find(std::string(name) + " is not set"), std::string::npos) << error_of(env);
  }
  Env env = open_mpi_env();
  env["OMPI_COMM_WORLD_RANK"] = "4";
  EXPECT_NE(error_of(env).find("OMPI_COMM_WORLD_RANK=4 is out of range"), std::string::npos) << error_of(env);
}

TEST(Identity, TorchrunWinsOverTheLauncherThatStartedIt) {
  // srun torchrun ...: the torchrun variables describe the worker, Slurm's describe torchrun.
  Env env = torchrun_env();
  env["SLURM_PROCID"] = "0";
  env["OMPI_COMM_WORLD_RANK"] = "0";
  EXPECT_EQ(identity_from(env).launcher, Launcher::torchrun);
}

Env slurm_env() {
  // 7 tasks: 2 on each of node01 node02 node03, 1 on node07; this is the 2nd task on node03.
  return {{"SLURM_PROCID", "5"},          {"SLURM_NTASKS", "7"},
          {"SLURM_LOCALID", "1"},         {"SLURM_NODEID", "2"},
          {"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_JOB_NODELIST", "node[01-03,07]"},
          {"SLURM_JOB_ID", "123456"}};
}

TEST(Identity, Slurm) {
  Identity id = identity_from(slurm_env());
  EXPECT_EQ(id.launcher, Launcher::slurm);
  EXPECT_EQ(launcher_name(id.launcher), "Slurm");
  EXPECT_EQ(id.rank, 5);
  EXPECT_EQ(id.world_size, 7);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.local_world_size, 2);
  EXPECT_EQ(id.master_addr, "node01");
  EXPECT_EQ(id.master_port, 29500 + 456);  // 29500 + SLURM_JOB_ID % 1000
  EXPECT_FALSE(id.agent_store);
  EXPECT_EQ(id.run_id, "123456");
}

TEST(Identity, SlurmLastNodeAndMixedNodelist) {
  Env env = slurm_env();
  env["SLURM_PROCID"] = "6";
  env["SLURM_LOCALID"] = "0";
  env["SLURM_NODEID"] = "3";
  env["SLURM_JOB_NODELIST"] = "gpu5,node[01-03]";
  Identity id = identity_from(env);
  EXPECT_EQ(id.local_world_size, 1);
  EXPECT_EQ(id.master_addr, "gpu5");
}

TEST(Identity, SlurmStepVariablesWinOverTheJobs) {
  Env env = slurm_env();
  env["SLURM_STEP_NODELIST"] = "node[02-03,07]";
  env["SLURM_STEP_NUM_TASKS"] = "5";
  env["SLURM_STEP_TASKS_PER_NODE"] = "2(x2),1";
  env["SLURM_PROCID"] = "3";
  env["SLURM_NODEID"] = "1";
  Identity id = identity_from(env);
  EXPECT_EQ(id.world_size, 5);
  EXPECT_EQ(id.local_world_size, 2);
  EXPECT_EQ(id.master_addr, "node02");
}

TEST(Identity, SlurmNtasksPerNodeAndOverrides) {
  Env env = slurm_env();
  env.erase("SLURM_TASKS_PER_NODE");
  env["SLURM_NTASKS_PER_NODE"] = "2";
  env["SLURM_NTASKS"] = "8";
  env["MASTER_ADDR"] = "10.1.1.1";
  env["MASTER_PORT"] = "40000";
  env.erase("SLURM_JOB_ID");
  Identity id = identity_from(env);
  EXPECT_EQ(id.local_world_size, 2);
  EXPECT_EQ(id.master_addr, "10.1.1.1");
  EXPECT_EQ(id.master_port, 40000);
  EXPECT_EQ(id.run_id, "none");
}

TEST(Identity, SlurmMissingAndInconsistent) {
  for (const char* name : {"SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASKS_PER_NODE", "SLURM_JOB_NODELIST"}) {
    Env env = slurm_env();
    env.erase(name);
    EXPECT_NE(error_of(env).find(std::string(name) + " is not set"), std::string::npos) << error_of(env);
  }
  Env env = slurm_env();
  env["SLURM_TASKS_PER_NODE"] = "2(x3)";
  EXPECT_NE(error_of(env).find("SLURM_TASKS_PER_NODE=2(x3) adds up to 6 tasks, but SLURM_NTASKS=7"),
            std::string::npos) << error_of(env);
  env = slurm_env();
  env["SLURM_NODEID"] = "4";
  EXPECT_NE(error_of(env).find("SLURM_NODEID=4 is out of range"), std::string::npos) << error_of(env);
  env = slurm_env();
  env["SLURM_TASKS_PER_NODE"] = "2(3),1";
  EXPECT_NE(error_of(env).find("SLURM_TASKS_PER_NODE=2(3),1 is malformed"), std::string::npos) << error_of(env);
  env = slurm_env();
  env["SLURM_JOB_NODELIST"] = "node[01-03";
  EXPECT_NE(error_of(env).find("SLURM_JOB_NODELIST: unbalanced '['"), std::string::npos) << error_of(env);
  env = slurm_env();
  env["SLURM_LOCALID"] = "2";
  EXPECT_NE(error_of(env).find("SLURM_LOCALID=2 is out of range"), std::string::npos) << error_of(env);
}

TEST(Identity, Pmi) {
  Identity id = identity_from({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}});
  EXPECT_EQ(id.launcher, Launcher::pmi);
  EXPECT_EQ(launcher_name(id.launcher), "PMI");
  EXPECT_EQ(id.rank, 1);
  EXPECT_EQ(id.world_size, 3);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.local_world_size, 3);
  EXPECT_EQ(id.master_addr, "127.0.0.1");
  EXPECT_EQ(id.master_port, 29500);
  EXPECT_FALSE(id.agent_store);

  Identity hydra = identity_from({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"},
                                  {"MPI_LOCALNRANKS", "2"}, {"MASTER_ADDR", "h0"}});
  EXPECT_EQ(hydra.local_rank, 1);
  EXPECT_EQ(hydra.local_world_size, 2);
  EXPECT_EQ(hydra.master_addr, "h0");
}

TEST(Identity, PmiMissingAndInconsistent) {
  EXPECT_NE(error_of({{"PMI_RANK", "0"}}).find("PMI_SIZE is not set"), std::string::npos);
  EXPECT_NE(error_of({{"PMI_SIZE", "2"}}).find("PMI_RANK is not set"), std::string::npos);
  EXPECT_NE(error_of({{"PMI_RANK", "2"}, {"PMI_SIZE", "2"}}).find("PMI_RANK=2 is out of range"), std::string::npos);
  EXPECT_NE(error_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}})
                .find("MASTER_ADDR is not set"),
            std::string::npos);
}

TEST(Identity, FromTheProcessEnvironment) {
  ::setenv("PMI_RANK", "0", 1);
  ::setenv("PMI_SIZE", "2", 1);
  Identity id = identity_from_environment();
  ::unsetenv("PMI_RANK");
  ::unsetenv("PMI_SIZE");
  if (id.launcher == Launcher::pmi) {
    EXPECT_EQ(id.world_size, 2);
  } else {
    // Run under a launcher (ddprun, srun, mpirun): its variables rightly win.
    EXPECT_NE(id.launcher, Launcher::none);
  }
}

TEST(SlurmNodelist, Expands) {
  using V = std::vector<std::string>;
  EXPECT_EQ(expand_slurm_nodelist("node[01-03,07],gpu5"), (V{"node01", "node02", "node03", "node07", "gpu5"}));
  EXPECT_EQ(expand_slurm_nodelist("a"), V{"a"});
  EXPECT_EQ(expand_slurm_nodelist("n[8-11]"), (V{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_slurm_nodelist("n[098-101]"), (V{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_slurm_nodelist("r[1-2]-n[1,3]"), (V{"r1-n1", "r1-n3", "r2-n1", "r2-n3"}));
  EXPECT_EQ(expand_slurm_nodelist("n[1-2]-ib,x"), (V{"n1-ib", "n2-ib", "x"}));
}

TEST(SlurmNodelist, RejectsMalformed) {
  for (const char* bad : {"", "a,,b", "n[1-2", "n1-2]", "n[]", "n[3-1]", "n[a-b]", "n[1-]", "n[1-999999999]", "a]b[c"}) {
    EXPECT_THROW(expand_slurm_nodelist(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace ddprun

// The worker environment of the contract's section 2, as real workers see it.
#include <gtest/gtest.h>

#include <fstream>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

std::map<std::string, std::string> env_of(const TempDir& dir, int rank) {
  return parse_env_file(dir.path() / ("env_" + std::to_string(rank)));
}

}  // namespace

class EnvContract : public ::testing::TestWithParam<int> {};

TEST_P(EnvContract, EveryWorkerGetsTheTorchrunVariables) {
  const int nproc = GetParam();
  TempDir dir;
  // Port 0: the kernel picks a free master port, so tests running side by side never collide.
  Launch launch({"--nproc-per-node", std::to_string(nproc), "--master-port", "0", "--max-restarts", "2",
                 "--rdzv-id", "job7",
                 test_worker_binary(), "env", dir.str()},
                {}, {"OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING",
                     "TORCHELASTIC_SIGNALS_TO_HANDLE"});
  Outcome outcome = launch.wait();
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;

  std::string master_port;
  for (int rank = 0; rank < nproc; ++rank) {
    auto env = env_of(dir, rank);
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["ROLE_RANK"], std::to_string(rank));
    EXPECT_EQ(env["WORLD_SIZE"], std::to_string(nproc));
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], std::to_string(nproc));
    EXPECT_EQ(env["ROLE_WORLD_SIZE"], std::to_string(nproc));
    EXPECT_EQ(env["GROUP_RANK"], "0");
    EXPECT_EQ(env["GROUP_WORLD_SIZE"], "1");
    EXPECT_EQ(env["ROLE_NAME"], "default");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_GT(std::stoi(env["MASTER_PORT"]), 0);
    if (rank == 0) master_port = env["MASTER_PORT"];
    EXPECT_EQ(env["MASTER_PORT"], master_port);
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "2");
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job7");
    EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "True");
    EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
    // PyTorch 1.x's name, which 2.x warns about: only for a program that links LibTorch 1.x (and a
    // Python worker whose torch is 1.x, from ddprun's sitecustomize); test_worker links no LibTorch.
    EXPECT_FALSE(env.contains("NCCL_ASYNC_ERROR_HANDLING"));
    EXPECT_EQ(env["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGTERM,SIGINT,SIGHUP,SIGQUIT");  // torchrun 2.11's
    EXPECT_FALSE(env.contains("CUDA_VISIBLE_DEVICES"));
    if (nproc > 1) {
      EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
    } else {
      EXPECT_FALSE(env.contains("OMP_NUM_THREADS"));
    }
    // <log_dir>/<run_id>_<random>/attempt_0/<local_rank>/error.json
    std::filesystem::path error_file = env["TORCHELASTIC_ERROR_FILE"];
    EXPECT_EQ(error_file.filename(), "error.json");
    EXPECT_EQ(error_file.parent_path().filename(), std::to_string(rank));
    EXPECT_EQ(error_file.parent_path().parent_path().filename(), "attempt_0");
    EXPECT_EQ(error_file.parent_path().parent_path().parent_path().filename().string().rfind("job7_", 0), 0U);
    EXPECT_EQ(env["DDPRUN_PROGRESS_FILE"], (error_file.parent_path() / "progress").string());
  }
  // The OMP warning is printed once, not once per worker.
  std::size_t warnings = 0;
  for (std::size_t at = outcome.err.find("OMP_NUM_THREADS"); at != std::string::npos;
       at = outcome.err.find("OMP_NUM_THREADS", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, nproc > 1 ? 1U : 0U) << outcome.err;
}

INSTANTIATE_TEST_SUITE_P(OneToEightWorkers, EnvContract, ::testing::Range(1, 9));

TEST(EnvContract, UserSettingsWin) {
  TempDir dir;
  Outcome outcome = run_ddprun({"--master-port", "0", "--nproc-per-node", "2", "--role", "trainer", test_worker_binary(), "env", dir.str()},
                               {{"OMP_NUM_THREADS", "4"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}, {"NCCL_ASYNC_ERROR_HANDLING", "3"},
                                {"CUDA_VISIBLE_DEVICES", "3,5"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  auto env = env_of(dir, 1);
  EXPECT_EQ(env["OMP_NUM_THREADS"], "4");
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "0");
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "3");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "3,5");  // inherited unchanged by default
  EXPECT_EQ(env["ROLE_NAME"], "trainer");
  EXPECT_EQ(outcome.err.find("OMP_NUM_THREADS"), std::string::npos);
}

TEST(EnvContract, SignalsToHandleReachTheWorkersByName) {
  TempDir dir;
  Outcome outcome = run_ddprun({"--master-port", "0", "--nproc-per-node", "1", "--signals-to-handle", "term,15,SIGUSR1,2",
                                test_worker_binary(), "env", dir.str()},
                               {{"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGHUP"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  // Names, as torch.distributed.elastic reads them back (getattr(signal, name)); ddprun's value, not
  // the one it inherited, as torchrun 2.x does.
  EXPECT_EQ(env_of(dir, 0)["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGTERM,SIGUSR1,SIGINT");
}

TEST(EnvContract, DevicesPerWorkerSplitsTheVisibleList) {
  TempDir dir;
  TempDir root;  // a recorded NVIDIA driver with 9 GPUs: only GPUs that exist count
  std::filesystem::create_directories(root.path() / "proc/driver/nvidia/gpus");
  for (int i = 0; i < 9; ++i) std::filesystem::create_directory(root.path() / ("proc/driver/nvidia/gpus/gpu" + std::to_string(i)));
  Outcome outcome = run_ddprun({"--master-port", "0", "--nproc-per-node", "2", "--devices-per-worker", "2", test_worker_binary(), "env",
                                dir.str()},
                               {{"CUDA_VISIBLE_DEVICES", "4,5,6,7,8"}, {"DDPRUN_TEST_DEVICE_ROOT", root.str()}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(env_of(dir, 0)["CUDA_VISIBLE_DEVICES"], "4,5");
  EXPECT_EQ(env_of(dir, 1)["CUDA_VISIBLE_DEVICES"], "6,7");
}

TEST(EnvContract, TooFewDevicesIsAUsageErrorBeforeAnythingStarts) {
  TempDir dir;
  Outcome outcome = run_ddprun({"--nproc-per-node", "3", "--devices-per-worker", "1", test_worker_binary(), "env",
                                dir.str()},
                               {{"CUDA_VISIBLE_DEVICES", "0,1"}});
  EXPECT_EQ(outcome.exit_status, 2);
  EXPECT_NE(outcome.err.find("--devices-per-worker"), std::string::npos) << outcome.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(EnvContract, LocalRankPlaceholderIsSubstitutedPerWorker) {
  Outcome outcome = run_ddprun({"--master-port", "0", "--nproc-per-node", "3", "--tee", "3", test_worker_binary(), "echo",
                                "--shard=${local_rank}", "plain"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  for (int rank = 0; rank < 3; ++rank) {
    std::string expected = "[default" + std::to_string(rank) + "]:--shard=" + std::to_string(rank);
    EXPECT_NE(outcome.out.find(expected + "\n"), std::string::npos) << outcome.out;
  }
}

TEST(EnvContract, PythonScriptRunsUnderPythonExec) {
  TempDir dir;
  std::ofstream(dir.path() / "train.py") << "import os, sys\n"
                                            "print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], "
                                            "'args', sys.argv[1:], 'unbuffered', '-u' in sys.orig_argv)\n";
  Outcome outcome = run_ddprun({"--master-port", "0", "--nproc-per-node", "2", (dir.path() / "train.py").string(), "--lr", "0.1"},
                               {{"PYTHON_EXEC", "/usr/bin/python3"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("rank 0 of 2 args ['--lr', '0.1'] unbuffered True"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("rank 1 of 2 args ['--lr', '0.1'] unbuffered True"), std::string::npos) << outcome.out;
}

TEST(EnvContract, PythonModuleRunsWithDashM) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "pkg");
  std::ofstream(dir.path() / "pkg" / "__init__.py") << "";
  std::ofstream(dir.path() / "pkg" / "hello.py") << "import os\nprint('module rank', os.environ['RANK'])\n";
  Outcome outcome = run_ddprun({"--master-port", "0", "--nproc-per-node", "2", "-m", "pkg.hello"},
                               {{"PYTHON_EXEC", "/usr/bin/python3"}, {"PYTHONPATH", dir.str()}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("module rank 1"), std::string::npos) << outcome.out;
}

// Existing programs work unchanged: workers meet at MASTER_ADDR:MASTER_PORT as torchrun's do, and
// a plain PyTorch script joins its process group through env:// and all-reduces over Gloo.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

bool system_python_has_torch() {
  std::string command = std::string(kSystemPython) + " -c 'import torch.distributed' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

}  // namespace

TEST(Compat, WorkersMeetAtTheMasterAddressAndPort) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "4", hello_ranks_binary()});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("rank 0: all 4 ranks of job"), std::string::npos) << outcome.out;
  for (int rank = 1; rank < 4; ++rank) {
    EXPECT_NE(outcome.out.find("rank " + std::to_string(rank) + " (local " + std::to_string(rank) +
                               ") of 4: confirmed by rank 0"),
              std::string::npos)
        << outcome.out;
  }
}

TEST(Compat, PyTorchGlooAllReduceThroughEnvInit) {
  if (!system_python_has_torch()) GTEST_SKIP() << kSystemPython << " cannot import torch (python3-torch missing)";
  for (const char* nproc : {"2", "3"}) {
    Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", nproc,
                                  examples_dir() + "/python/allreduce_gloo.py"},
                                 {{"PYTHON_EXEC", kSystemPython}});
    ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
    int world = std::atoi(nproc);
    int expected = world * (world + 1) / 2;
    for (int rank = 0; rank < world; ++rank) {
      std::string line = "rank " + std::to_string(rank) + "/" + nproc + ": all_reduce sum = " + std::to_string(expected);
      EXPECT_NE(outcome.out.find(line), std::string::npos) << outcome.out;
    }
  }
}

TEST(Compat, PyTorchWorkersRestartIntoAFreshProcessGroup) {
  if (!system_python_has_torch()) GTEST_SKIP() << kSystemPython << " cannot import torch (python3-torch missing)";
  // Attempt 0: rank 1 dies after the group formed; attempt 1 must form a new group and finish.
  TempDir dir;
  std::string script = (dir.path() / "flaky.py").string();
  std::ofstream(script) << "import os, sys, torch, torch.distributed as dist\n"
                           "dist.init_process_group('gloo', init_method='env://')\n"
                           "t = torch.ones(1); dist.all_reduce(t)\n"
                           "if os.environ['TORCHELASTIC_RESTART_COUNT'] == '0' and dist.get_rank() == 1:\n"
                           "    sys.exit(3)\n"
                           "dist.barrier()\n"
                           "print('attempt', os.environ['TORCHELASTIC_RESTART_COUNT'], 'rank', dist.get_rank(), "
                           "'sum', int(t.item()), flush=True)\n";
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--shutdown-timeout",
                                "5", script},
                               {{"PYTHON_EXEC", kSystemPython}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("attempt 1 rank 0 sum 2"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("attempt 1 rank 1 sum 2"), std::string::npos) << outcome.out;
}

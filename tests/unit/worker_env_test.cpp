// The worker's environment where ddprun adds its own Python modules: PYTHONPATH gets ddprun's
// folder first and keeps the user's entries as they were; the stack-dump variables come with it.
// What torchrun 2.11 adds beside the torchrun 1.13 contract: TORCHELASTIC_SIGNALS_TO_HANDLE, and
// NCCL_ASYNC_ERROR_HANDLING only for a program that links LibTorch 1.x.
#include <gtest/gtest.h>
#include <signal.h>

#include "launcher/workers/worker_env.hpp"

namespace ddprun::launcher {
namespace {

TEST(PythonPath, DdprunsFolderFirstTheUsersAfterAsTheyWere) {
  const std::string dir = "/opt/ddprun/share/ddprun/python";
  struct Row {
    std::optional<std::string> user;
    std::string expected;
  };
  const Row rows[] = {
      {std::nullopt, dir},
      {"", dir},  // an empty PYTHONPATH adds nothing; "dir:" would add the current folder
      {"/home/u/lib", dir + ":/home/u/lib"},
      {"/a::/b", dir + ":/a::/b"},  // the user's empty entry (the current folder) stays
      {":/a", dir + "::/a"},
      {dir + ":/a", dir + ":/a"},  // a ddprun inside a ddprun job: not twice
      {dir, dir},
  };
  for (const Row& row : rows) EXPECT_EQ(python_path_with(dir, row.user), row.expected) << row.user.value_or("(unset)");
}

TEST(WorkerEnv, PythonModulesAndStackDumpVariables) {
  WorkerSpec spec;
  spec.python_dir = "/x/share/ddprun/python";
  spec.python_stacks_file = "/logs/attempt_0/1/python_stacks.txt";
  spec.stacks_signal = 61;
  Environ base;
  base["PYTHONPATH"] = "/mine";
  Environ env = build_worker_env(base, spec);
  EXPECT_EQ(env["PYTHONPATH"], "/x/share/ddprun/python:/mine");
  EXPECT_EQ(env["DDPRUN_PYTHON_STACKS_FILE"], "/logs/attempt_0/1/python_stacks.txt");
  EXPECT_EQ(env["DDPRUN_STACKS_SIGNAL"], "61");

  WorkerSpec plain;  // no folder found (a ddprun copied out of its tree): nothing added
  Environ untouched = build_worker_env(base, plain);
  EXPECT_EQ(untouched["PYTHONPATH"], "/mine");
  EXPECT_FALSE(untouched.contains("DDPRUN_PYTHON_STACKS_FILE"));
  EXPECT_FALSE(untouched.contains("DDPRUN_STACKS_SIGNAL"));
  EXPECT_FALSE(build_worker_env(Environ{}, plain).contains("PYTHONPATH"));
}

TEST(SignalsToHandle, NamesInOrderAsTorchrunWritesTheDefault) {
  struct Row {
    std::vector<int> signals;
    std::string expected;
  };
  const Row rows[] = {
      {{SIGTERM, SIGINT, SIGHUP, SIGQUIT}, "SIGTERM,SIGINT,SIGHUP,SIGQUIT"},  // torchrun-worker-env.json
      {{SIGUSR1}, "SIGUSR1"},
      {{SIGINT, SIGTERM}, "SIGINT,SIGTERM"},  // the user's order
      {{}, ""},
  };
  for (const Row& row : rows) EXPECT_EQ(signals_to_handle_value(row.signals), row.expected);
}

TEST(LinksLibtorch1, OnlyLibTorchSonamesOfMajorVersionOne) {
  struct Row {
    std::vector<std::string> needed;
    bool expected;
  };
  const Row rows[] = {
      {{"libtorch.so.1.13", "libc.so.6"}, true},  // Debian's libtorch-dev 1.13
      {{"libc10.so.1.13"}, true},
      {{"libtorch_cpu.so.1.13"}, true},
      {{"libtorch_cuda.so.1.12"}, true},
      {{"libc10_cuda.so.1"}, true},
      {{"libtorch.so", "libc10.so"}, false},  // pytorch.org's and pip's LibTorch: no version to see
      {{"libtorch.so.2.11"}, false},
      {{"libtorch.so.10"}, false},  // 10 is not 1
      {{"libtorch.so.1x"}, false},
      {{"libtorch_python.so.1.13"}, false},  // not what a C++ program links for NCCL
      {{"libmytorch.so.1.13"}, false},
      {{"libc.so.6", "libstdc++.so.6"}, false},
      {{}, false},  // a script, a static binary, an unreadable file
  };
  for (const Row& row : rows) {
    EXPECT_EQ(links_libtorch_1(row.needed), row.expected) << (row.needed.empty() ? "(none)" : row.needed.front());
  }
}

TEST(WorkerEnv, TorchrunTwoVariablesAndTheOneNameOnlyOneXReads) {
  WorkerSpec spec;  // signals_to_handle: the default of --signals-to-handle
  Environ env = build_worker_env(Environ{}, spec);
  EXPECT_EQ(env["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_FALSE(env.contains("NCCL_ASYNC_ERROR_HANDLING")) << "PyTorch 2.x warns about it, twice per rank";

  spec.libtorch_1 = true;
  spec.signals_to_handle = "SIGUSR1";
  Environ base;
  base["TORCHELASTIC_SIGNALS_TO_HANDLE"] = "SIGHUP";  // torchrun overwrites it too
  env = build_worker_env(base, spec);
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGUSR1");

  base["NCCL_ASYNC_ERROR_HANDLING"] = "0";  // the user's own value stays
  EXPECT_EQ(build_worker_env(base, spec)["NCCL_ASYNC_ERROR_HANDLING"], "0");
}

}  // namespace
}  // namespace ddprun::launcher

// The worker's environment where ddprun adds its own Python modules: PYTHONPATH gets ddprun's
// folder first and keeps the user's entries as they were; the stack-dump variables come with it.
#include <gtest/gtest.h>

#include "launcher/worker_env.hpp"

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

}  // namespace
}  // namespace ddprun::launcher

// examples/plain_sgd under the three launchers it must work with: ddprun, torchrun (Debian's
// python3-torch, through shared/tools/torchrun-anchor) and Open MPI's mpirun. The example checks its
// own weights against a one-process run and exits non-zero when they differ; here each launcher must
// end with status 0 and rank 0's result line.
//
// The binaries are found from this test's own path (build/tests/runtime_plain_sgd -> build/bin/),
// torchrun-anchor from this source file's (<repo>/../shared/tools/), or $TORCHRUN_ANCHOR.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>
#include "../support/free_port.hpp"

namespace {

namespace fs = std::filesystem;

fs::path build_dir() { return fs::read_symlink("/proc/self/exe").parent_path().parent_path(); }
fs::path ddprun_binary() { return build_dir() / "bin" / "ddprun"; }
fs::path plain_sgd_binary() { return build_dir() / "bin" / "plain_sgd"; }

fs::path torchrun_anchor() {
  if (const char* path = std::getenv("TORCHRUN_ANCHOR"); path != nullptr && *path != '\0') return path;
  return fs::path(__FILE__).parent_path().parent_path().parent_path().parent_path() / "shared" / "tools" /
         "torchrun-anchor";
}

using ddprun::testing::free_port;

struct Outcome {
  int status = -1;  ///< exit status, or -1 when it did not exit normally
  std::string output;  ///< stdout and stderr together
};

std::string quoted(const std::string& word) {
  std::string text = "'";
  for (char c : word) text += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return text + "'";
}

/// Runs `argv` through the shell with stderr joined to stdout, killed after 240 s (coreutils
/// timeout), so that a hung job fails the test instead of hanging it.
Outcome run(const std::vector<std::string>& argv) {
  std::string command = "timeout -k 10 240";
  for (const std::string& word : argv) {
    command += ' ';
    command += quoted(word);
  }
  command += " 2>&1 </dev/null";
  Outcome outcome;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return outcome;
  char chunk[4096];
  std::size_t read = 0;
  while ((read = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) outcome.output.append(chunk, read);
  int status = ::pclose(pipe);
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

bool shell_succeeds(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

/// What a successful run prints on rank 0, whatever the launcher.
void expect_success(const Outcome& outcome, int world_size) {
  EXPECT_EQ(outcome.status, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("plain_sgd: rank 0 of " + std::to_string(world_size) + ","), std::string::npos)
      << outcome.output;
  EXPECT_TRUE(std::regex_search(outcome.output, std::regex(R"(final_loss=[0-9.e+-]+ max_rel_diff=[0-9.e+-]+ )")))
      << outcome.output;
  EXPECT_NE(outcome.output.find("plain_sgd: OK"), std::string::npos) << outcome.output;
  EXPECT_EQ(outcome.output.find("MISMATCH"), std::string::npos) << outcome.output;
}

TEST(PlainSgd, AloneIsAWorldOfOne) {
  expect_success(run({plain_sgd_binary()}), 1);
}

TEST(PlainSgd, RefusesABatchThatDoesNotPartition) {
  Outcome outcome = run({plain_sgd_binary(), "--samples", "100", "--global-batch", "30"});
  EXPECT_EQ(outcome.status, 2) << outcome.output;
  EXPECT_NE(outcome.output.find("must divide the samples"), std::string::npos) << outcome.output;
}

TEST(PlainSgd, UnderDdprunWithThreeRanks) {
  expect_success(run({ddprun_binary(), "--master-port", std::to_string(free_port()), "--nproc-per-node", "3",
                      plain_sgd_binary()}),
                 3);
}

TEST(PlainSgd, UnderTorchrunWithTwoRanks) {
  if (!shell_succeeds("/usr/bin/python3 -c 'import torch'")) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  if (!fs::exists(torchrun_anchor())) GTEST_SKIP() << torchrun_anchor() << " is missing (set TORCHRUN_ANCHOR)";
  expect_success(run({torchrun_anchor(), "--standalone", "--nproc_per_node", "2", "--no_python", plain_sgd_binary()}),
                 2);
}

TEST(PlainSgd, UnderOpenMpiWithTwoRanks) {
  if (!shell_succeeds("command -v mpirun")) GTEST_SKIP() << "mpirun is not installed (Debian openmpi-bin)";
  // Rank 0 hosts the store (mpirun has no agent); a port of its own keeps parallel tests apart.
  expect_success(run({"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x",
                      "MASTER_PORT=" + std::to_string(free_port()), plain_sgd_binary()}),
                 2);
}

}  // namespace

// Through the real launcher: build/bin/ddprun starts 2 workers of (1) a C++ trainer using
// ddprun::torch and (2) a Python script using PyTorch's own DistributedDataParallel on gloo with
// env:// (Debian's python3-torch, run by /usr/bin/python3); both end with identical ranks.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ranks.hpp"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status = -1;
  std::string output;
};

/// Runs a shell command line, stdout and stderr together.
Outcome run(const std::string& command) {
  Outcome outcome;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return outcome;
  std::array<char, 4096> chunk{};
  while (std::fgets(chunk.data(), chunk.size(), pipe) != nullptr) outcome.output += chunk.data();
  const int status = ::pclose(pipe);
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

TEST(UnderDdprun, CppTrainerWithDdprunTorch) {
  const Outcome outcome = run(std::string(DDPRUN_BINARY) + " --nproc-per-node 2 --master-port " +
                              std::to_string(ddptest::free_port()) + " --no-python " DDPRUN_TORCH_WORKER);
  EXPECT_EQ(outcome.status, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("rank 0: ok"), std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find("rank 1: ok"), std::string::npos) << outcome.output;
}

TEST(UnderDdprun, PythonScriptWithPyTorchDdp) {
  if (std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch (Debian's python3-torch is not installed)";
  }
  std::string pattern = (fs::temp_directory_path() / "ddprun-python-ddp-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  const fs::path out = pattern;
  const Outcome outcome =
      run("PYTHON_EXEC=/usr/bin/python3 " + std::string(DDPRUN_BINARY) + " --nproc-per-node 2 --master-port " +
          std::to_string(ddptest::free_port()) + " " DDPRUN_TORCH_TEST_DIR "/python_ddp.py " + out.string());
  EXPECT_EQ(outcome.status, 0) << outcome.output;
  const std::string rank0 = read_file(out / "rank0.txt");
  const std::string rank1 = read_file(out / "rank1.txt");
  EXPECT_EQ(rank0.size(), 65u) << outcome.output;  // 64 hex digits and a newline
  EXPECT_EQ(rank0, rank1) << outcome.output;
  fs::remove_all(out);
}

}  // namespace

// ddprun's stdin reaches rank 0 byte for byte, whatever it is: a regular file read faster than the
// worker takes it (the bytes read meanwhile must not disturb the write in flight), a pipe, and a
// device epoll cannot watch (/dev/zero). No terminal here: rank 0's stdin is a pipe ddprun feeds.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

#include "harness.hpp"

namespace ddprun::testing {
namespace {

/// 4 MiB of reproducible noise: a repeated pattern would hide bytes written from the wrong place.
std::string noise() {
  std::mt19937 engine(11);
  std::string bytes(4 << 20, '\0');
  for (auto& b : bytes) b = static_cast<char>(engine());
  return bytes;
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Runs `sh -c SCRIPT` with $0 = ddprun: the script redirects ddprun's stdin and execs it.
Outcome run_shell(const std::string& script) { return run_ddprun_via({"/bin/sh", "-c", script, ddprun_binary()}); }

std::string worker_copies_stdin_to(const std::filesystem::path& out) {
  return "\"$0\" --standalone --nproc-per-node 2 --pty off --no-python /bin/sh -c 'cat > " + out.string() +
         ".$RANK'";
}

TEST(StdinBytes, AFileArrivesUnchangedOnRankZeroOnly) {
  TempDir dir;
  const std::string bytes = noise();
  std::ofstream(dir.path() / "in", std::ios::binary) << bytes;
  Outcome outcome = run_shell("exec " + worker_copies_stdin_to(dir.path() / "out") + " < " + (dir.path() / "in").string());
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_TRUE(read_all(dir.path() / "out.0") == bytes) << "rank 0 got other bytes than ddprun's stdin";
  EXPECT_EQ(read_all(dir.path() / "out.1"), "") << "rank 1 reads /dev/null";
}

TEST(StdinBytes, APipeArrivesUnchanged) {
  TempDir dir;
  const std::string bytes = noise();
  std::ofstream(dir.path() / "in", std::ios::binary) << bytes;
  Outcome outcome = run_shell("cat " + (dir.path() / "in").string() + " | " + worker_copies_stdin_to(dir.path() / "out"));
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_TRUE(read_all(dir.path() / "out.0") == bytes) << "rank 0 got other bytes than ddprun's stdin";
}

TEST(StdinBytes, ADeviceEpollCannotWatchIsReadLikeAFile) {
  TempDir dir;
  Outcome outcome = run_shell("exec \"$0\" --standalone --nproc-per-node 1 --pty off --no-python /bin/sh -c "
                              "'head -c 3000000 | wc -c > " + (dir.path() / "count").string() + "' < /dev/zero");
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(read_all(dir.path() / "count"), "3000000\n");
}

}  // namespace
}  // namespace ddprun::testing

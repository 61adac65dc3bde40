// A worker killed by the kernel's OOM killer is named as such in the summary. Needs root and a
// cgroup memory controller to confine the test (so only the test's own processes can be killed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

/// A memory cgroup of its own with a small limit: v1 (memory.limit_in_bytes) or v2 (memory.max).
class MemoryCgroup {
 public:
  MemoryCgroup() {
    if (::geteuid() != 0) {
      skip("needs root to create a cgroup");
      return;
    }
    std::string name = "ddprun_oom_test_" + std::to_string(::getpid());
    if (std::filesystem::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
      dir_ = std::filesystem::path("/sys/fs/cgroup/memory") / name;
      limit_file_ = "memory.limit_in_bytes";
    } else if (read_file("/sys/fs/cgroup/cgroup.subtree_control").find("memory") != std::string::npos) {
      dir_ = std::filesystem::path("/sys/fs/cgroup") / name;
      limit_file_ = "memory.max";
    } else {
      skip("no cgroup memory controller to confine the test to");
      return;
    }
    std::error_code ec;
    if (!std::filesystem::create_directory(dir_, ec)) {
      skip("cannot create " + dir_.string() + ": " + ec.message());
      return;
    }
    std::ofstream(dir_ / limit_file_) << (96 << 20);
  }
  ~MemoryCgroup() {
    if (dir_.empty()) return;
    // rmdir succeeds once its processes are gone; they are by now, but the kernel may lag.
    eventually([&] { return ::rmdir(dir_.c_str()) == 0; }, std::chrono::seconds(5));
  }
  bool usable() const { return skip_reason_.empty(); }
  const std::string& skip_reason() const { return skip_reason_; }
  std::string procs_file() const { return (dir_ / "cgroup.procs").string(); }

 private:
  void skip(const std::string& why) {
    skip_reason_ = why;
    dir_.clear();
  }
  std::filesystem::path dir_;
  std::string limit_file_;
  std::string skip_reason_;
};

}  // namespace

TEST(Oom, KernelOomKillIsNamedInTheSummary) {
  MemoryCgroup cgroup;
  if (!cgroup.usable()) GTEST_SKIP() << cgroup.skip_reason();
  // ddprun joins the cgroup before it starts, so it and its workers are confined to 96 MiB.
  std::string script = "echo $$ > " + cgroup.procs_file() + " && exec \"$0\" \"$@\"";
  Outcome outcome = run_ddprun_via({"/bin/sh", "-c", script, ddprun_binary(), "--standalone", "--nproc-per-node", "2",
                                    test_worker_binary(), "hog", "1"});
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_NE(outcome.err.find("exitcode  : -9"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("OOM killer"), std::string::npos) << outcome.err;
}

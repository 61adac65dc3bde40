// Environment failures around logs: a full disk under --log-dir loses no line silently, and a
// TMPDIR that does not exist is no reason not to run (torchrun falls back to /tmp too).
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <set>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

/// A tmpfs of `size` mounted on a fresh folder, unmounted when it goes; needs root.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& size) {
    mounted_ = ::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  std::string str() const { return dir_.str(); }

 private:
  TempDir dir_;
  bool mounted_ = false;
};

std::set<std::string> lines_of_rank(const std::string& text, int rank) {
  std::set<std::string> lines;
  const std::string tag = "rank=" + std::to_string(rank) + " ";
  for (const auto& line : split_lines(text)) {
    auto at = line.find(tag);
    if (at != std::string::npos) lines.insert(line.substr(at));
  }
  return lines;
}

}  // namespace

TEST(LogErrors, AFullDiskIsReportedOncePerFileAndNoLineIsLost) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  SmallDisk disk("256k");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here";
  constexpr int kLines = 20000;  // about 2.5 MB per worker: far past the 256 KiB disk
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "-r", "3", "--log-dir", disk.str(),
                                test_worker_binary(), "flood", std::to_string(kLines)});
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err.substr(0, 2000);  // the job's status is the workers'
  // Said once per file, naming it and the cause.
  std::size_t warnings = 0;
  for (const auto& line : split_lines(outcome.err)) {
    if (line.find("ddprun: warning: cannot write ") == 0) {
      ++warnings;
      EXPECT_NE(line.find("stdout.log: No space left on device"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(warnings, 2u) << outcome.err.substr(0, 2000);
  EXPECT_NE(outcome.err.find("log file(s) are incomplete"), std::string::npos) << outcome.err.substr(0, 2000);
  // Every line is in its log file or on the console.
  for (int rank = 0; rank < 2; ++rank) {
    std::set<std::string> seen = lines_of_rank(outcome.out, rank);
    for (const auto& entry : std::filesystem::recursive_directory_iterator(disk.str())) {
      if (entry.path().filename() == "stdout.log" && entry.path().parent_path().filename() == std::to_string(rank)) {
        auto in_file = lines_of_rank(read_file(entry.path()), rank);
        seen.insert(in_file.begin(), in_file.end());
      }
    }
    std::size_t complete = 0;
    for (const auto& line : seen) complete += line.ends_with(" end") ? 1 : 0;
    EXPECT_EQ(complete, static_cast<std::size_t>(kLines)) << "rank " << rank;
  }
}

TEST(LogErrors, AMissingTmpdirFallsBackToTmp) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", test_worker_binary(), "echo", "hi"},
                               {{"TMPDIR", "/nonexistent/ddprun-test"}});
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.err.find("internal error"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.out.find("hi"), std::string::npos) << outcome.out;
}

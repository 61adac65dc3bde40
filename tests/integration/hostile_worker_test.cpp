// What a worker does to its own files and its own process image never ends the launcher, and never
// gets the worker killed by the launcher's own signals (issue 25): real ddprun, real workers.
//   - A worker that cuts its DDPRUN_PROGRESS_FILE to nothing and writes it back in a loop while
//     ddprun samples it ten times a second: the job ends as its workers do (before: ddprun died of
//     SIGBUS, exit 135, within seconds).
//   - A worker that re-execs itself in a loop, catching ddprun's stack signal in each image, while
//     `ddprun stacks` is asked again and again: it is never killed by that signal (before: it died
//     within a few captures).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness.hpp"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

/// A worker that writes a whole version-1 progress file (common/progress_layout.hpp), then, for
/// CUT_SECONDS, cuts it to 0 bytes and writes the 512 bytes back, as fast as it can.
constexpr const char* kCutter = R"(import os, struct, time
path = os.environ["DDPRUN_PROGRESS_FILE"]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
text = b"cut and regrown"
header = struct.pack("<QIIiIQqqqII", 0x3147525052504444, 1, 512, os.getpid(), 0, 2, 1, 1,
                     time.monotonic_ns(), len(text), 0)
image = (header + text).ljust(512, b"\0")
os.pwrite(fd, image, 0)
end = time.monotonic() + float(os.environ["CUT_SECONDS"])
while time.monotonic() < end:
    os.ftruncate(fd, 0)
    os.pwrite(fd, image, 0)
)";

TEST(HostileWorker, CuttingItsProgressFileInALoopDoesNotEndTheLauncher) {
  if (::access(kSystemPython, X_OK) != 0) GTEST_SKIP() << kSystemPython << " is not installed";
  TempDir dir;
  const auto script = dir.path() / "cutter.py";
  std::ofstream(script) << kCutter;
  // --status-interval 0.1: the monitor reads every rank's file ten times a second. Before the fix,
  // 10 s of this ended ddprun in 8 runs of 8 (after 0.2-7.8 s; 4 s of it in about half the runs).
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--status-interval", "0.1", "--no-python",
                                kSystemPython, script.string()},
                               {{"CUT_SECONDS", "10"}});
  EXPECT_EQ(outcome.exit_status, 0) << "ddprun must end as its workers did (135: it died of SIGBUS)\n" << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: status: "), std::string::npos) << "the monitor sampled\n" << outcome.err;
}

}  // namespace
}  // namespace ddprun::testing

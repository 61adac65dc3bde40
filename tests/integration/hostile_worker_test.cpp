// What a worker does to its own files and its own process image never ends the launcher, and never
// gets the worker killed by the launcher's own signals (issue 25): real ddprun, real workers.
//   - A worker that cuts its DDPRUN_PROGRESS_FILE to nothing and writes it back in a loop while
//     ddprun samples it ten times a second: the job ends as its workers do (before: ddprun died of
//     SIGBUS, exit 135, within seconds).
//   - A worker that re-execs itself in a loop, catching ddprun's stack signal in each image, while
//     `ddprun stacks` is asked again and again: it is never killed by that signal (before: it died
//     within a few captures). And the same race made certain: a signal left pending across an exec
//     into an image without the handler (before: the worker died of it every time).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
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


/// A Python worker that re-execs itself for ever, with the environment it was started with (read
/// back from /proc/self/environ: ddprun's sitecustomize removes its two variables, so each image
/// registers faulthandler for ddprun's stack signal again). Each image first fills BALLAST_MB of
/// memory, whose teardown makes execve long: a signal queued while execve runs is delivered once
/// it returns, when the image's handler is gone and the signal's default action applies.
constexpr const char* kReExec = R"(import os, sys
env = dict(kv.split("=", 1) for kv in open("/proc/self/environ").read().split("\0") if "=" in kv)
ballast = bytearray(b"\1") * (int(env["BALLAST_MB"]) << 20)
os.execve(sys.executable, [sys.executable, sys.argv[0]], env)
)";

TEST(HostileWorker, AWorkerThatReExecsItselfIsNeverKilledByAStackCapture) {
  if (::access(kSystemPython, X_OK) != 0) GTEST_SKIP() << kSystemPython << " is not installed";
  RuntimeDir runtime;
  TempDir dir;
  const auto script = dir.path() / "reexec.py";
  std::ofstream(script) << kReExec;
  const std::map<std::string, std::string> env{{"XDG_RUNTIME_DIR", runtime.str()}};
  Launch job({"--standalone", "--nproc-per-node", "2", script.string()},
             {{"XDG_RUNTIME_DIR", runtime.str()}, {"PYTHON_EXEC", kSystemPython}, {"BALLAST_MB", "200"}});
  ASSERT_TRUE(eventually([&] { return run_ddprun({"stacks"}, env).exit_status == 0; }));
  // Before the fix (signal 61, whose default action ends a process), a worker died after 7, 9, 12,
  // 13 and 36 captures (about 0.15 s each) in 5 runs of 6. After it, a capture whose signal came while the
  // worker exec'd waits 2 s for a dump that does not come: 60 captures, or 30 s of them.
  int captures = 1;
  const auto enough = std::chrono::steady_clock::now() + 30s;
  for (; captures < 60 && std::chrono::steady_clock::now() < enough && process_alive(job.pid()); ++captures) {
    run_ddprun({"stacks"}, env);
  }
  const bool running = process_alive(job.pid());
  job.send(SIGTERM);
  Outcome outcome = job.wait();
  EXPECT_TRUE(running) << "the job ended after " << captures << " captures\n" << outcome.err;
  EXPECT_EQ(outcome.err.find("exitcode  : -"), std::string::npos) << "a worker died of a signal\n" << outcome.err;
  EXPECT_NE(outcome.err.find("received SIGTERM"), std::string::npos) << outcome.err;
}

/// The same race, made certain: a worker whose faulthandler is registered (ddprun's sitecustomize)
/// blocks the stack signal, so ddprun's signal stays pending; then it execs a Python without site
/// (no handler: the default action) that unblocks it.
constexpr const char* kBlockThenExec = R"(import os, signal, sys, time
env = dict(kv.split("=", 1) for kv in open("/proc/self/environ").read().split("\0") if "=" in kv)
signo = int(env["DDPRUN_STACKS_SIGNAL"])
signal.pthread_sigmask(signal.SIG_BLOCK, [signo])
ready = os.path.join(env["READY_DIR"], "blocked")
open(ready + ".tmp", "w").close()
os.rename(ready + ".tmp", ready)
while not os.path.exists(os.path.join(env["READY_DIR"], "go")):
    time.sleep(0.01)
after = os.path.join(env["READY_DIR"], "unblocked")
os.execv(sys.executable, [sys.executable, "-S", "-c",
         "import signal, time\n"
         f"signal.pthread_sigmask(signal.SIG_UNBLOCK, [{signo}])\n"
         f"open({after!r}, 'w').close()\n"
         "time.sleep(600)\n"])
)";

TEST(HostileWorker, AStackSignalPendingAcrossAnExecIsDroppedNotFatal) {
  if (::access(kSystemPython, X_OK) != 0) GTEST_SKIP() << kSystemPython << " is not installed";
  RuntimeDir runtime;
  TempDir dir;
  const auto script = dir.path() / "block_then_exec.py";
  std::ofstream(script) << kBlockThenExec;
  const std::map<std::string, std::string> env{{"XDG_RUNTIME_DIR", runtime.str()}};
  Launch job({"--standalone", "--nproc-per-node", "1", script.string()},
             {{"XDG_RUNTIME_DIR", runtime.str()}, {"PYTHON_EXEC", kSystemPython}, {"READY_DIR", dir.str()}});
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(dir.path() / "blocked"); }));
  Outcome stacks = run_ddprun({"stacks"}, env);  // the worker catches the signal: ddprun sends it
  EXPECT_EQ(stacks.exit_status, 0) << stacks.err;
  std::ofstream(dir.path() / "go").close();
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(dir.path() / "unblocked") || !process_alive(job.pid()); }));
  // A signal left pending is delivered when the new image unblocks it, before it wrote the file.
  const bool running = process_alive(job.pid());
  job.send(SIGTERM);
  Outcome outcome = job.wait();
  EXPECT_TRUE(running) << outcome.err;
  EXPECT_EQ(outcome.err.find("exitcode  : -"), std::string::npos) << "the worker died of a signal\n" << outcome.err;
}

}  // namespace
}  // namespace ddprun::testing

// Ctrl-Z: SIGTSTP reaches ddprun alone (its workers are in process groups of their own), so ddprun
// pauses the whole job itself: every worker stopped, then ddprun; continued together. Under
// torchrun the terminal stops torchrun and its workers, which share its process group.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <thread>

#include "harness.hpp"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

/// The state letter of /proc/PID/stat ('R', 'S', 'T', ...), or 0 when the process is gone.
char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '\0' : text[paren + 2];
}

pid_t pid_in(const std::filesystem::path& file) {
  std::ifstream in(file);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

/// Two workers that write their pid, then sleep `seconds`.
std::vector<std::string> sleepers(const TempDir& dir, const std::string& seconds, std::vector<std::string> flags = {}) {
  std::vector<std::string> args{"--standalone", "--nproc-per-node", "2", "--no-python"};
  args.insert(args.end(), flags.begin(), flags.end());
  // "$$$$": ddprun, as torchrun, turns "$$" into "$"; the shell then gets "$$", its pid.
  for (const char* word : {"/bin/sh", "-c"}) args.emplace_back(word);
  args.push_back("echo $$$$ > " + dir.str() + "/pid.$RANK; exec sleep " + seconds);
  return args;
}

TEST(JobControl, SigtstpPausesEveryWorkerAndContinuesThemWithDdprun) {
  TempDir dir;
  Launch launch(sleepers(dir, "3"));
  ASSERT_TRUE(eventually([&] { return pid_in(dir.path() / "pid.0") > 0 && pid_in(dir.path() / "pid.1") > 0; }, 20s));
  const pid_t workers[] = {pid_in(dir.path() / "pid.0"), pid_in(dir.path() / "pid.1")};

  launch.send(SIGTSTP);
  EXPECT_TRUE(eventually([&] { return process_state(launch.pid()) == 'T'; }, 5s)) << "ddprun stops itself";
  // A SIGSTOP takes effect when its target next runs: on a loaded machine a worker may still be
  // runnable ('R') for a moment after ddprun stopped itself.
  for (pid_t worker : workers) {
    EXPECT_TRUE(eventually([&] { return process_state(worker) == 'T'; }, 5s)) << "worker " << worker << " stopped";
  }
  std::this_thread::sleep_for(3500ms);  // past the workers' own end: stopped, they cannot get there
  for (pid_t worker : workers) EXPECT_EQ(process_state(worker), 'T') << "worker " << worker << " still paused";

  launch.send(SIGCONT);
  Outcome outcome = launch.wait(30s);
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
}

TEST(JobControl, SigtstpListedInSignalsToHandleStopsTheJobInstead) {
  TempDir dir;
  // The same signal goes to the workers (sleep stops on it rather than ending), then SIGKILL after
  // the grace.
  Launch launch(sleepers(dir, "30", {"--signals-to-handle", "SIGTERM,SIGTSTP", "--shutdown-timeout", "1"}));
  ASSERT_TRUE(eventually([&] { return pid_in(dir.path() / "pid.1") > 0; }, 20s));
  launch.send(SIGTSTP);
  Outcome outcome = launch.wait(30s);
  EXPECT_EQ(outcome.exit_status, 128 + SIGTSTP) << outcome.err;
  EXPECT_EQ(process_state(pid_in(dir.path() / "pid.1")), '\0') << "the worker was stopped for good";
}

}  // namespace
}  // namespace ddprun::testing

// The agent's one capture queue on real processes, with a stand-in gdb that logs each attach and
// takes its time: requests while a capture runs share it (one attach per rank, not one per asker),
// a hang drops an on-demand capture and answers its askers with the hang's stacks, a newer hang
// replaces an older one, nothing to capture answers at once, and no handler runs after the queue
// is gone.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "launcher/observe/capture_queue.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

/// A process to capture: `sleep 600`, killed and reaped at the end of the test.
struct Sleeper {
  pid_t pid = ::fork();
  Sleeper() {
    if (pid == 0) {
      ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Sleeper() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

/// A gdb stand-in: appends "attach PID" to `log`, waits `seconds`, prints one thread, exits.
class FakeGdb {
 public:
  FakeGdb(const fs::path& dir, double seconds) : path_(dir / "gdb"), log_(dir / "attaches.log") {
    std::ofstream(path_) << "#!/bin/sh\n"
                         << "while [ $# -gt 0 ]; do [ \"$1\" = -p ] && pid=$2; shift; done\n"  // gdb ... -p PID ...
                         << "echo \"attach $pid\" >> " << log_.string() << "\n"
                         << "sleep " << seconds << "\n"
                         << "echo \"Thread 1 (LWP $pid):\"\n"
                         << "echo \"#0  0x0000000000401000 in fake_frame_of_$pid ()\"\n";
    fs::permissions(path_, fs::perms::owner_all);
  }
  StackCaptureSettings settings() const {
    StackCaptureSettings settings;
    settings.gdb = path_.string();
    return settings;
  }
  int attaches() const {
    std::ifstream in(log_);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }

 private:
  fs::path path_;
  fs::path log_;
};

/// Runs `io` (reaping what the capture starts, as the agent does) until `done` or a minute.
void run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(20));
    io.restart();
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
}

std::vector<StackTarget> targets_of(const Sleeper& sleeper, int rank = 0) {
  return {StackTarget{rank, rank, 0, sleeper.pid, ""}};
}

/// The innermost native frame the capture read for its first rank ("" when none).
std::string frame_of(const std::vector<CapturedRank>& ranks) {
  if (ranks.empty() || ranks[0].stacks.threads.empty() || ranks[0].stacks.threads[0].frames.empty()) return "";
  return ranks[0].stacks.threads[0].frames[0].function;
}

TEST(CaptureQueue, RequestsWhileACaptureRunsShareIt) {
  testing_support::ScratchFolder dir("capture_queue");
  FakeGdb gdb(dir.root(), 0.5);
  Sleeper worker;
  boost::asio::io_context io;
  CaptureQueue queue(io, gdb.settings());
  std::vector<std::string> answers;
  for (int i = 0; i < 3; ++i) {
    queue.on_demand(targets_of(worker), [&](const std::vector<CapturedRank>& ranks) { answers.push_back(frame_of(ranks)); });
  }
  EXPECT_TRUE(queue.busy());
  EXPECT_TRUE(answers.empty()) << "answered inside the call";
  run_until(io, [&] { return answers.size() == 3; });
  ASSERT_EQ(answers.size(), 3u);
  for (const auto& frame : answers) EXPECT_EQ(frame, "fake_frame_of_" + std::to_string(worker.pid));
  EXPECT_EQ(gdb.attaches(), 1) << "one capture for three askers";
  EXPECT_FALSE(queue.busy());

  // Once it is over, a new request captures anew.
  bool again = false;
  queue.on_demand(targets_of(worker), [&](const std::vector<CapturedRank>&) { again = true; });
  run_until(io, [&] { return again; });
  EXPECT_EQ(gdb.attaches(), 2);
}

TEST(CaptureQueue, AHangDropsARequestsCaptureAndAnswersItsAskers) {
  testing_support::ScratchFolder dir("capture_queue");
  FakeGdb gdb(dir.root(), 1.5);
  Sleeper worker;
  boost::asio::io_context io;
  CaptureQueue queue(io, gdb.settings());
  std::vector<std::string> asked;
  queue.on_demand(targets_of(worker), [&](const std::vector<CapturedRank>& ranks) { asked.push_back(frame_of(ranks)); });
  run_until(io, [&] { return gdb.attaches() == 1; });  // the request's gdb is attached
  const auto hang_at = std::chrono::steady_clock::now();
  std::string digest, done;
  queue.for_hang(
      targets_of(worker, 5), [&](const std::vector<CapturedRank>& ranks) { digest = frame_of(ranks); },
      [&](const std::vector<CapturedRank>& ranks) {
        done = frame_of(ranks);
        EXPECT_EQ(ranks.at(0).stacks.rank, 5) << "the hang's targets were captured";
      });
  EXPECT_TRUE(queue.hang_capture_running());
  run_until(io, [&] { return !done.empty() && !asked.empty(); });
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - hang_at).count();
  const std::string frame = "fake_frame_of_" + std::to_string(worker.pid);
  EXPECT_EQ(digest, frame);
  EXPECT_EQ(done, frame);
  ASSERT_EQ(asked.size(), 1u) << "the asker was not answered";
  EXPECT_EQ(asked[0], frame);
  EXPECT_EQ(gdb.attaches(), 2);
  EXPECT_LT(took, 2.9) << "the hang waited for the request's gdb instead of dropping it";
  EXPECT_FALSE(queue.hang_capture_running());
}

TEST(CaptureQueue, ANewerHangReplacesAnOlderOnesCapture) {
  testing_support::ScratchFolder dir("capture_queue");
  FakeGdb gdb(dir.root(), 0.5);
  Sleeper worker;
  boost::asio::io_context io;
  CaptureQueue queue(io, gdb.settings());
  int first_calls = 0;
  bool second_done = false;
  queue.for_hang(targets_of(worker), [&](auto&) { ++first_calls; }, [&](auto&) { ++first_calls; });
  queue.for_hang(targets_of(worker), [](auto&) {}, [&](auto&) { second_done = true; });
  run_until(io, [&] { return second_done; });
  EXPECT_TRUE(second_done);
  EXPECT_EQ(first_calls, 0) << "the replaced hang's handlers ran";
}

TEST(CaptureQueue, NothingToCaptureIsAnsweredOnTheLoopNotInsideTheCall) {
  boost::asio::io_context io;
  StackCaptureSettings settings;
  settings.native = false;
  CaptureQueue queue(io, settings);
  bool answered = false;
  std::size_t ranks_seen = 99;
  queue.on_demand({}, [&](const std::vector<CapturedRank>& ranks) {
    answered = true;
    ranks_seen = ranks.size();
  });
  EXPECT_FALSE(answered);
  bool digest = false, done = false;
  queue.for_hang({}, [&](auto&) { digest = true; }, [&](auto&) { done = true; });
  EXPECT_FALSE(digest || done);
  run_until(io, [&] { return answered && done; });
  EXPECT_TRUE(answered);
  EXPECT_EQ(ranks_seen, 0u);
  EXPECT_TRUE(digest);
  EXPECT_TRUE(done);
}

TEST(CaptureQueue, NoHandlerRunsAfterTheQueueIsGone) {
  testing_support::ScratchFolder dir("capture_queue");
  FakeGdb gdb(dir.root(), 0.2);
  Sleeper worker;
  boost::asio::io_context io;
  bool called = false;
  {
    CaptureQueue queue(io, gdb.settings());
    queue.on_demand(targets_of(worker), [&](auto&) { called = true; });
    queue.on_demand({}, [&](auto&) { called = true; });
  }
  // Longer than the stand-in gdb takes: anything left on the loop runs now.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  run_until(io, [&] { return std::chrono::steady_clock::now() > until; });
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace ddprun::launcher

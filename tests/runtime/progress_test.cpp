// The progress channel: what a reader sees, that it never sees a torn write while another process
// writes flat out, and that reporting makes no syscall (checked under seccomp's strict mode,
// which kills the process on any syscall but read, write, exit and sigreturn).
#include "ddprun/progress.hpp"

#include <gtest/gtest.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/progress_layout.hpp"
#include "ddprun/error.hpp"

namespace ddprun {
namespace {

namespace fs = std::filesystem;

class Progress : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ddprun_progress_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = (dir_ / "progress").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string path_;
};

/// Runs `body` in a forked child; returns its wait status.
int run_child(const std::function<void()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

/// Ends the process with the exit syscall itself (_exit uses exit_group, which strict mode forbids).
[[noreturn]] void exit_under_seccomp(int code) {
  ::syscall(SYS_exit, code);
  __builtin_unreachable();
}

void enter_strict_seccomp() {
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) ::_exit(77);
}

TEST_F(Progress, ReaderSeesWhatTheWriterPublished) {
  ProgressReader reader(path_);  // the agent's side may come first: it creates the file
  EXPECT_EQ(fs::file_size(path_), common::progress_layout::kFileSize);
  EXPECT_FALSE(reader.read()) << "nothing published yet";

  ProgressWriter writer(path_);
  EXPECT_FALSE(reader.read()) << "opened, nothing published yet";
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  writer.report(3, 96, "epoch 1");
  auto snapshot = reader.read();
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->generation, 1u);
  EXPECT_EQ(snapshot->step, 3);
  EXPECT_EQ(snapshot->samples, 96);
  EXPECT_EQ(snapshot->text, "epoch 1");
  EXPECT_EQ(snapshot->pid, ::getpid());
  EXPECT_GE(snapshot->timestamp_ns, now.tv_sec * 1'000'000'000LL + now.tv_nsec);

  writer.report(4, 128);  // text replaced: {} clears it
  snapshot = reader.read();
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->generation, 2u);
  EXPECT_EQ(snapshot->step, 4);
  EXPECT_EQ(snapshot->text, "");
}

TEST_F(Progress, AnUnchangedReportWritesNothing) {
  ProgressWriter writer(path_);
  ProgressReader reader(path_);
  writer.report(7, 7, "same");
  auto first = reader.read();
  writer.report(7, 7, "same");
  writer.report(7, 7, "same");
  auto again = reader.read();
  ASSERT_TRUE(first && again);
  EXPECT_EQ(again->generation, first->generation);
  EXPECT_EQ(again->timestamp_ns, first->timestamp_ns);
  writer.report(7, 7, "other");
  EXPECT_EQ(reader.read()->generation, first->generation + 1);
}

TEST_F(Progress, ANewWriterPublishesAtOnceAndRecoversFromADeadWriter) {
  {
    ProgressWriter writer(path_);
    writer.report(5, 5, "x");
  }
  // A writer killed in the middle of a write: the sequence stays odd.
  {
    std::fstream file(path_, std::ios::in | std::ios::out | std::ios::binary);
    std::uint64_t odd = 5;
    file.seekp(24);
    file.write(reinterpret_cast<const char*>(&odd), sizeof odd);
  }
  ProgressReader reader(path_);
  EXPECT_FALSE(reader.read()) << "no consistent snapshot of a half-written record";
  ProgressWriter restarted(path_);
  restarted.report(5, 5, "x");  // the same values as the dead writer's: still published, fresh timestamp
  auto snapshot = reader.read();
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->generation, 4u);
  EXPECT_EQ(snapshot->step, 5);
}

TEST_F(Progress, LongTextIsCutAtACharacterBoundary) {
  ProgressWriter writer(path_);
  ProgressReader reader(path_);
  std::string text(255, 'a');
  text += "\xc3\xa9tape";  // 'é' straddles byte 256
  writer.report(1, 1, text);
  EXPECT_EQ(reader.read()->text, std::string(255, 'a'));
  writer.report(1, 1, std::string(300, 'b'));
  EXPECT_EQ(reader.read()->text, std::string(256, 'b'));
}

TEST_F(Progress, ReaderOfAForeignFileSeesNothing) {
  std::ofstream(path_) << std::string(600, 'z');
  ProgressReader reader(path_);
  EXPECT_FALSE(reader.read());
  EXPECT_THROW(ProgressReader((dir_ / "missing" / "progress").string()), Error);
}

TEST_F(Progress, SnapshotsAreNeverTornWhileAnotherProcessWrites) {
  ProgressReader reader(path_);
  constexpr std::int64_t kSteps = 300'000;
  pid_t writer_pid = ::fork();
  if (writer_pid == 0) {
    ProgressWriter writer(path_);
    for (std::int64_t step = 1; step <= kSteps; ++step) {
      // Every field derives from the step: a torn snapshot would mix two steps.
      writer.report(step, step * 32, "step " + std::to_string(step) + std::string(static_cast<std::size_t>(step % 200), '.'));
    }
    ::_exit(0);
  }
  std::int64_t last_step = 0, reads = 0, bad = 0;
  std::uint64_t last_generation = 0;
  int status = 0;
  bool writer_done = false;
  while (last_step < kSteps && !writer_done) {
    // Checked before the read: after the writer's end, one more read sees its last step.
    writer_done = reads % 1024 == 0 && ::waitpid(writer_pid, &status, WNOHANG) == writer_pid;
    auto snapshot = reader.read();
    if (!snapshot) continue;
    ++reads;
    const std::int64_t step = snapshot->step;
    const std::string expected = "step " + std::to_string(step) + std::string(static_cast<std::size_t>(step % 200), '.');
    if (snapshot->samples != step * 32 || snapshot->text != expected || step < last_step ||
        snapshot->generation < last_generation) {
      ++bad;
    }
    last_step = step;
    last_generation = snapshot->generation;
  }
  if (!writer_done) ::waitpid(writer_pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(last_step, kSteps);
  EXPECT_EQ(bad, 0) << "of " << reads << " snapshots";
  EXPECT_GT(reads, 1);
}

TEST_F(Progress, ThreadsOfOneWorkerTakeTurns) {
  ProgressWriter writer(path_);
  ProgressReader reader(path_);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&writer, t] {
      for (std::int64_t i = 0; i < 20'000; ++i) writer.report(t, i, "thread " + std::to_string(t));
    });
  }
  for (auto& thread : threads) thread.join();
  auto snapshot = reader.read();
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->text, "thread " + std::to_string(snapshot->step));
  EXPECT_EQ(snapshot->samples, 19'999);
}

/// 0: CLOCK_MONOTONIC_COARSE is read without a syscall (the vDSO); 1: it takes one (a kernel
/// without a vDSO); 77: seccomp's strict mode is not available here.
int probe_clock() {
  int probe = run_child([] {
    enter_strict_seccomp();
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    exit_under_seccomp(0);
  });
  if (WIFEXITED(probe)) return WEXITSTATUS(probe);
  return 1;
}

TEST_F(Progress, ReportingMakesNoSyscall) {
  // A changed value reads the coarse clock: from the vDSO whatever the clock source, but on a
  // kernel without one only the unchanged case can hold.
  const int probe = probe_clock();
  if (probe == 77) GTEST_SKIP() << "seccomp strict mode unavailable";
  const bool clock_in_vdso = probe == 0;

  int status = run_child([this, clock_in_vdso] {
    ProgressWriter writer(path_);
    writer.report(0, 0, "warm up");  // touches the pages: page faults are not syscalls
    enter_strict_seccomp();
    for (int i = 0; i < 1000; ++i) writer.report(0, 0, "warm up");  // unchanged
    if (clock_in_vdso) {
      for (std::int64_t i = 1; i < 1000; ++i) writer.report(i, i * 8, i % 2 ? "odd" : "even");  // changed
    }
    exit_under_seccomp(0);
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) + ": a syscall" : "exit");
  if (!clock_in_vdso) GTEST_SKIP() << "CLOCK_MONOTONIC_COARSE is a syscall on this host: only unchanged reports checked";
}

TEST_F(Progress, TheProcessChannelFollowsTheEnvironment) {
  // Unset: nothing happens, nothing is created.
  int status = run_child([] {
    ::unsetenv("DDPRUN_PROGRESS_FILE");
    progress::report(1, 2, "ignored");
    ::_exit(progress::enabled() ? 1 : 0);
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  const bool strict = probe_clock() == 0;  // else no seccomp here: the values are still checked
  status = run_child([this, strict] {
    ::setenv("DDPRUN_PROGRESS_FILE", path_.c_str(), 1);
    progress::report(41, 1312, "training");  // opens the file
    if (strict) enter_strict_seccomp();
    progress::report(41, 1312, "training");
    progress::report(42, 1344, "training");
    exit_under_seccomp(progress::enabled() ? 0 : 1);
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto snapshot = ProgressReader(path_).read();
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->step, 42);
  EXPECT_EQ(snapshot->samples, 1344);
  EXPECT_EQ(snapshot->text, "training");

  // Unusable: one line on stderr, then silence; training goes on.
  status = run_child([this] {
    ::setenv("DDPRUN_PROGRESS_FILE", (dir_ / "no" / "such" / "dir").c_str(), 1);
    progress::report(1, 1);
    progress::report(2, 2);
    ::_exit(progress::enabled() ? 1 : 0);
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace ddprun

#include "launcher/report/failure_summary.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <string>

namespace ddprun::launcher {
namespace {

using std::chrono::seconds;
using std::chrono::system_clock;

constexpr std::int64_t kT0 = 1700000000;  // 2023-11-14_22:13:20 UTC

system_clock::time_point at(std::int64_t epoch_s, int extra_ms = 0) {
  return system_clock::time_point(seconds(epoch_s)) + std::chrono::milliseconds(extra_ms);
}

WorkerFailure failure(int rank, int exitcode, int pid, system_clock::time_point time) {
  WorkerFailure f;
  f.rank = rank;
  f.local_rank = rank;
  f.exitcode = exitcode;
  f.pid = pid;
  f.time = time;
  f.host = "node0.example.com";
  f.error_file = "/tmp/logs/run/attempt_0/" + std::to_string(rank) + "/error.json";
  return f;
}

/// The summary's times are local time, as torchrun's; the expected texts are written in UTC.
class FailureSummary : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* tz = std::getenv("TZ")) saved_tz_ = tz;
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
  void TearDown() override {
    if (saved_tz_) {
      ::setenv("TZ", saved_tz_->c_str(), 1);
    } else {
      ::unsetenv("TZ");
    }
    ::tzset();
  }

 private:
  std::optional<std::string> saved_tz_;
};

// The expected texts of the first four tests are torchrun 1.13's output for the same failures
// (ChildFailedError.format_msg), without its leading blank line.

TEST_F(FailureSummary, ExitCodeWithoutErrorFileMatchesTorchrun) {
  EXPECT_EQ(format_failure_summary("train.py", {failure(0, 1, 4242, at(kT0, 700))}),
            "============================================================\n"
            "train.py FAILED\n"
            "------------------------------------------------------------\n"
            "Failures:\n"
            "  <NO_OTHER_FAILURES>\n"
            "------------------------------------------------------------\n"
            "Root Cause (first observed failure):\n"
            "[0]:\n"
            "  time      : 2023-11-14_22:13:20\n"
            "  host      : node0.example.com\n"
            "  rank      : 0 (local_rank: 0)\n"
            "  exitcode  : 1 (pid: 4242)\n"
            "  error_file: <N/A>\n"
            "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
            "============================================================\n");
}

TEST_F(FailureSummary, SegfaultMatchesTorchrun) {
  EXPECT_EQ(format_failure_summary("train.py", {failure(0, -11, 4242, at(kT0))}),
            "======================================================\n"
            "train.py FAILED\n"
            "------------------------------------------------------\n"
            "Failures:\n"
            "  <NO_OTHER_FAILURES>\n"
            "------------------------------------------------------\n"
            "Root Cause (first observed failure):\n"
            "[0]:\n"
            "  time      : 2023-11-14_22:13:20\n"
            "  host      : node0.example.com\n"
            "  rank      : 0 (local_rank: 0)\n"
            "  exitcode  : -11 (pid: 4242)\n"
            "  error_file: <N/A>\n"
            "  traceback : Signal 11 (SIGSEGV) received by PID 4242\n"
            "======================================================\n");
}

TEST_F(FailureSummary, ErrorFileTracebackIsIndentedAsTorchrunDoes) {
  auto f = failure(0, 1, 4242, at(kT0 + 9));
  f.error = ErrorFileContent{"ValueError: boom",
                             "Traceback (most recent call last):\n"
                             "  File \"/work/train.py\", line 12, in <module>\n"
                             "    main()\n"
                             "  File \"/work/train.py\", line 9, in main\n"
                             "    raise ValueError(\"boom\")\n"
                             "ValueError: boom\n",
                             kT0 + 5};
  f.stderr_tail = "the error file says it better";
  // torchrun also prints the traceback's final newline as a line of two spaces; ddprun trims it.
  EXPECT_EQ(format_failure_summary("train.py", {f}),
            "==================================================\n"
            "train.py FAILED\n"
            "--------------------------------------------------\n"
            "Failures:\n"
            "  <NO_OTHER_FAILURES>\n"
            "--------------------------------------------------\n"
            "Root Cause (first observed failure):\n"
            "[0]:\n"
            "  time      : 2023-11-14_22:13:25\n"
            "  host      : node0.example.com\n"
            "  rank      : 0 (local_rank: 0)\n"
            "  exitcode  : 1 (pid: 4242)\n"
            "  error_file: /tmp/logs/run/attempt_0/0/error.json\n"
            "  traceback : Traceback (most recent call last):\n"
            "    File \"/work/train.py\", line 12, in <module>\n"
            "      main()\n"
            "    File \"/work/train.py\", line 9, in main\n"
            "      raise ValueError(\"boom\")\n"
            "  ValueError: boom\n"
            "==================================================\n");
}

TEST_F(FailureSummary, RootCauseIsTheEarliestErrorFileTimestampOthersListedByTime) {
  auto sigterm = failure(0, -15, 100, at(kT0 + 3));
  auto flat = failure(1, 1, 101, at(kT0 + 4));
  flat.error = ErrorFileContent{"flat failure", "", kT0 + 1};
  auto sigkill = failure(2, -9, 102, at(kT0 + 2));
  // Listed by time, as they happened: rank 2 (t+2) before rank 0 (t+3).
  EXPECT_EQ(format_failure_summary("train.py", {sigkill, flat, sigterm}),
            "=====================================================\n"
            "train.py FAILED\n"
            "-----------------------------------------------------\n"
            "Failures:\n"
            "[2]:\n"
            "  time      : 2023-11-14_22:13:22\n"
            "  host      : node0.example.com\n"
            "  rank      : 2 (local_rank: 2)\n"
            "  exitcode  : -9 (pid: 102)\n"
            "  error_file: <N/A>\n"
            "  traceback : Signal 9 (SIGKILL) received by PID 102\n"
            "[0]:\n"
            "  time      : 2023-11-14_22:13:23\n"
            "  host      : node0.example.com\n"
            "  rank      : 0 (local_rank: 0)\n"
            "  exitcode  : -15 (pid: 100)\n"
            "  error_file: <N/A>\n"
            "  traceback : Signal 15 (SIGTERM) received by PID 100\n"
            "-----------------------------------------------------\n"
            "Root Cause (first observed failure):\n"
            "[1]:\n"
            "  time      : 2023-11-14_22:13:21\n"
            "  host      : node0.example.com\n"
            "  rank      : 1 (local_rank: 1)\n"
            "  exitcode  : 1 (pid: 101)\n"
            "  error_file: /tmp/logs/run/attempt_0/1/error.json\n"
            "  traceback : flat failure\n"
            "=====================================================\n");
}

TEST_F(FailureSummary, OomKillIsSaidOnTheSignalLine) {
  auto f = failure(3, -9, 777, at(kT0));
  f.local_rank = 1;
  f.oom_killed = true;
  EXPECT_EQ(format_failure_summary("./trainer", {f}),
            "============================================================\n"
            "./trainer FAILED\n"
            "------------------------------------------------------------\n"
            "Failures:\n"
            "  <NO_OTHER_FAILURES>\n"
            "------------------------------------------------------------\n"
            "Root Cause (first observed failure):\n"
            "[3]:\n"
            "  time      : 2023-11-14_22:13:20\n"
            "  host      : node0.example.com\n"
            "  rank      : 3 (local_rank: 1)\n"
            "  exitcode  : -9 (pid: 777)\n"
            "  error_file: <N/A>\n"
            "  traceback : Signal 9 (SIGKILL) received by PID 777: killed by the kernel's OOM killer\n"
            "============================================================\n");
}

TEST_F(FailureSummary, StderrTailReplacesTheDocumentationLink) {
  auto f = failure(0, 2, 4242, at(kT0));
  f.stderr_tail = "loading data\nerror: /data/train.bin: No such file or directory\n\n";
  std::string summary = format_failure_summary("./trainer", {f});
  EXPECT_NE(summary.find("  exitcode  : 2 (pid: 4242)\n"
                         "  error_file: <N/A>\n"
                         "  traceback : (last lines of stderr)\n"
                         "    loading data\n"
                         "    error: /data/train.bin: No such file or directory\n"
                         "====="),
            std::string::npos)
      << summary;
  EXPECT_EQ(summary.find("To enable traceback"), std::string::npos);
}

TEST_F(FailureSummary, SignalLineThenStderrTail) {
  auto f = failure(0, -11, 4242, at(kT0));
  f.stderr_tail =
      "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):";
  std::string summary = format_failure_summary("train.py", {f});
  EXPECT_NE(summary.find("  exitcode  : -11 (pid: 4242)\n"
                         "  error_file: <N/A>\n"
                         "  traceback : Signal 11 (SIGSEGV) received by PID 4242\n"
                         "  (last lines of stderr)\n"
                         "    Fatal Python error: Segmentation fault\n"
                         "    \n"
                         "    Current thread 0x00007f (most recent call first):\n"
                         "====="),
            std::string::npos)
      << summary;
}

TEST_F(FailureSummary, ErrorFileMessageIsAddedWhenTheTracebackLacksIt) {
  auto f = failure(0, 1, 4242, at(kT0));
  f.error = ErrorFileContent{"std::runtime_error: NCCL timeout", "#0 trainer::step()\n#1 main", std::nullopt};
  EXPECT_NE(format_failure_summary("./trainer", {f})
                .find("  error_file: /tmp/logs/run/attempt_0/0/error.json\n"
                      "  traceback : #0 trainer::step()\n"
                      "  #1 main\n"
                      "  std::runtime_error: NCCL timeout\n"),
            std::string::npos);
}

TEST_F(FailureSummary, ErrorFileWithoutTracebackOrMessage) {
  auto only_message = failure(0, 1, 4242, at(kT0));
  only_message.error = ErrorFileContent{"line one\nline two", "", std::nullopt};
  EXPECT_NE(format_failure_summary("p", {only_message}).find("  traceback : line one\n  line two\n"),
            std::string::npos);

  auto empty = failure(0, 1, 4242, at(kT0));
  empty.error = ErrorFileContent{};
  EXPECT_NE(format_failure_summary("p", {empty}).find("  traceback : <N/A>\n"), std::string::npos);
}

TEST_F(FailureSummary, OomKillWithoutASignalLineGetsALineOfItsOwn) {
  auto f = failure(0, 1, 4242, at(kT0));
  f.error = ErrorFileContent{"MemoryError", "", std::nullopt};
  f.oom_killed = true;
  EXPECT_NE(format_failure_summary("p", {f}).find(
                "  traceback : MemoryError\n  killed by the kernel's OOM killer\n"),
            std::string::npos);
}

TEST_F(FailureSummary, WithoutErrorFilesTheEarliestObservedExitIsTheRootCause) {
  auto later = failure(0, -6, 100, at(kT0, 900));
  auto first = failure(1, -11, 101, at(kT0, 200));  // same second: the observed order decides
  std::string summary = format_failure_summary("p", {later, first});
  EXPECT_NE(summary.find("Root Cause (first observed failure):\n[1]:\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("Failures:\n[0]:\n"), std::string::npos) << summary;
}

TEST_F(FailureSummary, ErrorFileTimestampCompetesWithObservedExits) {
  auto segfault = failure(0, -11, 100, at(kT0 + 10));
  auto raised = failure(1, 1, 101, at(kT0 + 30));
  raised.error = ErrorFileContent{"RuntimeError: early", "", kT0 + 5};  // recorded long before it exited
  EXPECT_NE(
      format_failure_summary("p", {segfault, raised}).find("Root Cause (first observed failure):\n[1]:\n"),
      std::string::npos);
}

TEST_F(FailureSummary, FullTiesGoToTheLowestRank) {
  std::string summary =
      format_failure_summary("p", {failure(5, 1, 105, at(kT0)), failure(4, 1, 104, at(kT0))});
  EXPECT_NE(summary.find("Root Cause (first observed failure):\n[4]:\n"), std::string::npos) << summary;
}

TEST_F(FailureSummary, RulesFollowTheWidestLineInCharactersUpTo60) {
  auto f = failure(0, -9, 1, at(kT0));
  f.host = "h";
  // The widest line of the block, "  traceback : Signal 9 (SIGKILL) received by PID 1", is 50 characters.
  EXPECT_TRUE(format_failure_summary("p", {f}).starts_with(std::string(50, '=') + "\np FAILED\n"));
  std::string accented;
  for (int i = 0; i < 45; ++i) accented += "\xC3\xA9";  // 45 characters in 90 bytes
  EXPECT_TRUE(format_failure_summary(accented, {f}).starts_with(std::string(52, '=') + "\n" + accented));
  std::string long_program(70, 'p');
  EXPECT_TRUE(
      format_failure_summary(long_program, {f}).starts_with(std::string(60, '=') + "\n" + long_program));
}

TEST_F(FailureSummary, NoFailures) {
  EXPECT_EQ(format_failure_summary("p", {}),
            "========\n"
            "p FAILED\n"
            "--------\n"
            "Failures:\n"
            "  <NO_OTHER_FAILURES>\n"
            "--------\n"
            "Root Cause (first observed failure):\n"
            "  <N/A>\n"
            "========\n");
}

TEST_F(FailureSummary, WorkerTextCannotDriveTheTerminalAndIsBounded) {
  auto f = failure(0, 1, 100, at(kT0));
  std::string traceback = "Traceback (most recent call last):\n";
  for (int i = 0; i < 200000; ++i) traceback += "  File \"x.py\", line " + std::to_string(i) + "\n";
  traceback += "\x1b]0;owned\x07\x1b[2JRuntimeError: boom";
  f.error = ErrorFileContent{"RuntimeError: boom", traceback, kT0};
  std::string summary = format_failure_summary("p", {f});
  EXPECT_EQ(summary.find('\x1b'), std::string::npos);
  EXPECT_EQ(summary.find('\x07'), std::string::npos);
  EXPECT_NE(summary.find("^[]0;owned^G^[[2JRuntimeError: boom"), std::string::npos);
  EXPECT_LT(summary.size(), 20u * 1024u);
  EXPECT_NE(summary.find("earlier lines not shown; all of it is in /tmp/logs/run/attempt_0/0/error.json"),
            std::string::npos)
      << summary.substr(0, 2000);
}

TEST_F(FailureSummary, ModuleNotFoundNamesTheInterpreterAndPythonExec) {
  auto f = failure(0, 1, 4242, at(kT0));
  f.stderr_tail =
      "Traceback (most recent call last):\n  File \"/w/train.py\", line 1, in <module>\n    import torch\n"
      "ModuleNotFoundError: No module named 'torch'\n";
  f.python = "/usr/local/bin/python3 (python3 on PATH)";
  std::string summary = format_failure_summary("train.py", {f});
  EXPECT_NE(summary.find("    ModuleNotFoundError: No module named 'torch'\n"
                         "  (ddprun) no module named 'torch' in the workers' Python, /usr/local/bin/python3 "
                         "(python3 on PATH); to run them with another interpreter, set PYTHON_EXEC=/path/to/python\n"
                         "====="),
            std::string::npos)
      << summary;
  // The same text from an error file (a module imported after the record decorator).
  auto g = failure(1, 1, 4243, at(kT0 + 1));
  g.error = ErrorFileContent{"ModuleNotFoundError: No module named 'apex.amp'", "Traceback ...\n", kT0 + 1};
  g.python = "/v/bin/python (VIRTUAL_ENV=/v)";
  EXPECT_NE(format_failure_summary("train.py", {g}).find("no module named 'apex.amp' in the workers' Python, /v/bin/python"),
            std::string::npos);
}

TEST_F(FailureSummary, NoModuleHintForOtherFailuresOrProgramsNotRunByPython) {
  auto f = failure(0, 1, 4242, at(kT0));
  f.stderr_tail = "ModuleNotFoundError: No module named 'torch'\n";
  EXPECT_EQ(format_failure_summary("./trainer", {f}).find("(ddprun)"), std::string::npos);  // exec'd: no python
  f.python = "/usr/bin/python3 (PYTHON_EXEC)";
  f.stderr_tail = "ImportError: cannot import name 'x' from 'torch'\n";
  EXPECT_EQ(format_failure_summary("t.py", {f}).find("(ddprun)"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::launcher

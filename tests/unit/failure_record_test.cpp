// FailureRecord: an attempt's failures as the summary shows them, and the job's unwritable logs.
#include "launcher/report/failure_record.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

WorkerExit exit_of(int local_rank, int exitcode) {
  WorkerExit exit;
  exit.local_rank = local_rank;
  exit.pid = 1000 + local_rank;
  exit.exitcode = exitcode;
  return exit;
}

TEST(FailureRecord, DescribesEachFailureFirstObservedFirst) {
  testing_support::ScratchFolder scratch("failure_record");
  const auto error_file = scratch.root() / "error.json";
  scratch.write(error_file, R"({"message": {"message": "ValueError: bad", "extraInfo": {"py_callstack": "tb"}}})", 0644);
  FailureRecord record("node-a", "/usr/bin/python3 (python3 on PATH)", OomWatch());
  record.begin_attempt(2);
  record.set_error_file(1, error_file.string());
  record.record(exit_of(1, 3), 5, "last line\n");
  record.record(exit_of(0, -SIGKILL), 4, "");
  ASSERT_EQ(record.failures().size(), 2U);
  const WorkerFailure& first = record.failures()[0];
  EXPECT_EQ(first.rank, 5);
  EXPECT_EQ(first.local_rank, 1);
  EXPECT_EQ(first.exitcode, 3);
  EXPECT_EQ(first.pid, 1001);
  EXPECT_EQ(first.host, "node-a");
  EXPECT_EQ(first.python, "/usr/bin/python3 (python3 on PATH)");
  EXPECT_EQ(first.error_file, error_file.string());
  ASSERT_TRUE(first.error.has_value());
  EXPECT_EQ(first.error->message, "ValueError: bad");
  EXPECT_EQ(first.stderr_tail, "last line\n");
  const WorkerFailure& second = record.failures()[1];
  EXPECT_EQ(second.error_file, "");
  EXPECT_FALSE(second.error.has_value());
  EXPECT_FALSE(second.oom_killed);  // no OOM counter to read

  record.begin_attempt(2);  // the next attempt starts with none
  EXPECT_TRUE(record.failures().empty());
}

TEST(FailureRecord, UnwritableLogsAreWarnedAboutNowAndAtTheEnd) {
  FailureRecord record("node-a", "", OomWatch());
  EXPECT_FALSE(record.incomplete_logs_warning());
  EXPECT_EQ(record.log_error({.local_rank = 1, .path = "/l/1/stdout.log", .reason = "No space left on device"}),
            "warning: cannot write /l/1/stdout.log: No space left on device; local rank 1's lines go to the console "
            "from now on");
  EXPECT_EQ(record.log_error({.local_rank = 0, .path = "/l/filtered_stdout.log", .reason = "EIO", .filtered = true}),
            "warning: cannot write /l/filtered_stdout.log: EIO; local rank 0's matching lines are no longer copied "
            "there");
  EXPECT_EQ(record.incomplete_logs_warning(),
            "warning: 2 log file(s) are incomplete (/l/1/stdout.log: No space left on device); their lines after the "
            "failure were shown on the console");
  record.begin_attempt(1);  // the job's, not the attempt's
  EXPECT_TRUE(record.incomplete_logs_warning());
}

}  // namespace
}  // namespace ddprun::launcher

// --hang-timeout on real jobs: a PyTorch 1.13 gloo job whose rank 1 sleeps before all_reduce, and
// plain_sgd (C++, ddprun::runtime) whose rank 1 stalls the same way. ddprun must find the hang,
// print a digest naming rank 1 where it sleeps and the others in the all-reduce, write every rank's
// stacks to the log folder, and with --hang-action stop end the job with exit 1 and the hang in the
// failure summary. Slow jobs that still do something (print, compute) must never be called hung.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness.hpp"

using namespace ddprun::testing;
namespace fs = std::filesystem;

namespace {

bool system_python_has_torch() {
  std::string command = std::string(kSystemPython) + " -c 'import torch.distributed' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

bool has_gdb() { return std::system("gdb --version >/dev/null 2>&1") == 0; }

std::string plain_sgd_binary() { return PLAIN_SGD_BINARY; }

/// A gloo job whose rank 1 sleeps (line 6) while the others wait in all_reduce (line 7).
fs::path write_sleeping_rank_script(const fs::path& dir) {
  fs::path script = dir / "sleepy_rank.py";
  std::ofstream(script) << "import time\n"
                           "import torch, torch.distributed as dist\n"
                           "dist.init_process_group('gloo', init_method='env://')\n"
                           "t = torch.ones(1)\n"
                           "if dist.get_rank() == 1:\n"
                           "    time.sleep(600)\n"
                           "dist.all_reduce(t)\n"
                           "print('never', flush=True)\n";
  return script;
}

/// The attempt's stacks folder under `log_dir` (<log_dir>/<run>/attempt_0/stacks), once it exists.
std::optional<fs::path> stacks_dir(const fs::path& log_dir) {
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(log_dir, error); it != fs::recursive_directory_iterator();
       it.increment(error)) {
    if (error) break;
    if (it->is_directory() && it->path().filename() == "stacks") return it->path();
  }
  return std::nullopt;
}

/// Whether every rank 0..world-1 has its stacks file.
bool every_rank_written(const fs::path& log_dir, int world) {
  auto dir = stacks_dir(log_dir);
  if (!dir) return false;
  for (int rank = 0; rank < world; ++rank) {
    if (!fs::exists(*dir / ("rank_" + std::to_string(rank) + ".txt"))) return false;
  }
  return true;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(Hang, PyTorchRankAsleepBeforeAllReduceIsNamedWhereItSleeps) {
  if (!system_python_has_torch()) GTEST_SKIP() << kSystemPython << " cannot import torch (python3-torch missing)";
  TempDir dir;
  const fs::path script = write_sleeping_rank_script(dir.path());
  const fs::path logs = dir.path() / "logs";
  Launch job({"--standalone", "--nproc-per-node", "3", "--hang-timeout", "3", "--log-dir", logs.string(), script.string()},
             {{"PYTHON_EXEC", kSystemPython}});
  // --hang-action report: the job goes on; once every rank's stacks are written, stop it.
  ASSERT_TRUE(eventually([&] { return every_rank_written(logs, 3); }, std::chrono::seconds(240)))
      << "no stacks written";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  job.send(SIGTERM);
  Outcome outcome = job.wait(std::chrono::seconds(120));
  EXPECT_EQ(outcome.exit_status, 128 + SIGTERM) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: hang: no rank made progress for ")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: hang: rank 1: time.sleep(600) <- sleepy_rank.py:6\n")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: hang: ranks 0,2: all_reduce <- sleepy_rank.py:7\n")) << outcome.err;
  // The odd one out first.
  EXPECT_LT(outcome.err.find("hang: rank 1:"), outcome.err.find("hang: ranks 0,2:")) << outcome.err;
  EXPECT_FALSE(contains(outcome.err, "FAILED")) << outcome.err;

  const fs::path stacks = *stacks_dir(logs);
  const std::string rank1 = read_file(stacks / "rank_1.txt");
  EXPECT_TRUE(contains(rank1, "sleepy_rank.py\", line 6 in <module>")) << rank1;
  const std::string rank0 = read_file(stacks / "rank_0.txt");
  EXPECT_TRUE(contains(rank0, "distributed_c10d.py\", line")) << rank0;
  EXPECT_TRUE(contains(rank0, "in all_reduce")) << rank0;
  if (has_gdb()) {
    // Native frames of every thread too: the gloo threads of the waiting rank.
    EXPECT_TRUE(contains(rank0, "== native frames (every thread, innermost first) ==\n")) << rank0;
    EXPECT_TRUE(contains(rank0, "c10d::ProcessGroupGloo")) << rank0;
  }
}

TEST(Hang, PyTorchHangActionStopEndsTheJobWithTheHangInTheSummary) {
  if (!system_python_has_torch()) GTEST_SKIP() << kSystemPython << " cannot import torch (python3-torch missing)";
  TempDir dir;
  const fs::path script = write_sleeping_rank_script(dir.path());
  const fs::path logs = dir.path() / "logs";
  Outcome outcome = Launch({"--standalone", "--nproc-per-node", "3", "--hang-timeout", "3", "--hang-action", "stop",
                            "--max-restarts", "2", "--log-dir", logs.string(), script.string()},
                           {{"PYTHON_EXEC", kSystemPython}})
                        .wait(std::chrono::seconds(240));
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: hang: stopping the workers (--hang-action stop)\n")) << outcome.err;
  EXPECT_FALSE(contains(outcome.err, "restarting")) << outcome.err;  // stop ends the job, restarts or not
  // The summary: torchrun's frame, the hang as the root cause, where each rank stood.
  EXPECT_TRUE(contains(outcome.err, script.string() + " FAILED\n")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "Root Cause: hang\n")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "  hang      : no rank made progress for ")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "  action    : --hang-action stop\n")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "  where     : rank 1: time.sleep(600) <- sleepy_rank.py:6\n")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "              ranks 0,2: all_reduce <- sleepy_rank.py:7\n")) << outcome.err;
  EXPECT_TRUE(every_rank_written(logs, 3));
}

TEST(Hang, CppWorkerStalledRankIsNamedAndStopEndsTheJob) {
  if (!has_gdb()) GTEST_SKIP() << "gdb missing: a C++ worker's stacks come from gdb";
  TempDir dir;
  const fs::path logs = dir.path() / "logs";
  const fs::path events = dir.path() / "events.jsonl";
  Outcome outcome = Launch({"--standalone", "--nproc-per-node", "3", "--hang-timeout", "2", "--hang-action", "stop",
                            "--events", events.string(), "--log-dir", logs.string(), plain_sgd_binary(), "--stall-rank",
                            "1"})
                        .wait(std::chrono::seconds(240));
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: hang: rank 1: stall <- train <- main\n")) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: hang: ranks 0,2: ddprun::detail::GlooWork::wait <- train <- main\n"))
      << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "Root Cause: hang\n")) << outcome.err;
  ASSERT_TRUE(every_rank_written(logs, 3));
  const std::string rank1 = read_file(*stacks_dir(logs) / "rank_1.txt");
  EXPECT_TRUE(contains(rank1, "no Python frames")) << rank1;  // never sent the Python signal
  EXPECT_TRUE(contains(rank1, "stall(int, long)")) << rank1;
  // The job's events: the hang, then each rank's stacks file.
  const std::string log = read_file(events);
  EXPECT_TRUE(contains(log, "\"event\":\"hang_detected\"")) << log;
  EXPECT_TRUE(contains(log, "\"action\":\"stop\"")) << log;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(log, "rank_" + std::to_string(rank) + ".txt")) << log;
  }
  EXPECT_LT(log.find("hang_detected"), log.find("stacks_written")) << log;
}

TEST(Hang, HangActionRestartRestartsTheWorkersAsAFailureDoes) {
  if (!has_gdb()) GTEST_SKIP() << "gdb missing: a C++ worker's stacks come from gdb";
  TempDir dir;
  Outcome outcome = Launch({"--standalone", "--nproc-per-node", "2", "--hang-timeout", "2", "--hang-action", "restart",
                            "--max-restarts", "1", "--log-dir", (dir.path() / "logs").string(), plain_sgd_binary(),
                            "--stall-rank", "1"})
                        .wait(std::chrono::seconds(240));
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "; restarting the worker group, restart 1 of 1\n")) << outcome.err;
  EXPECT_TRUE(fs::exists(dir.path() / "logs")) << outcome.err;
  EXPECT_TRUE(stacks_dir(dir.path() / "logs"));
  EXPECT_TRUE(contains(outcome.err, "  action    : --hang-action restart\n")) << outcome.err;
}

TEST(Hang, SlowButProgressingJobsAreNeverCalledHung) {
  TempDir dir;
  // One prints a line every 1.5 s; the other computes for 8 s without a word: neither is hung at 3 s.
  const fs::path printing = dir.path() / "printing.py";
  std::ofstream(printing) << "import time\n"
                             "for i in range(5):\n"
                             "    time.sleep(1.5)\n"
                             "    print('step', i, flush=True)\n";
  const fs::path computing = dir.path() / "computing.py";
  std::ofstream(computing) << "import time\n"
                              "end = time.time() + 8\n"
                              "while time.time() < end:\n"
                              "    sum(range(10000))\n";
  for (const fs::path& script : {printing, computing}) {
    Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--hang-timeout", "3", "--hang-action", "stop",
                                  script.string()},
                                 {{"PYTHON_EXEC", kSystemPython}});
    EXPECT_EQ(outcome.exit_status, 0) << script << ": " << outcome.err;
    EXPECT_FALSE(contains(outcome.err, "hang")) << script << ": " << outcome.err;
  }
}

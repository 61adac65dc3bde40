// --events FILE on real jobs: every kind of event a job has, in order, with the worker's pid and
// exit status; written as it happens (a reader sees a running job's events); two agents of a
// multi-node job on loopback (round formed, node joined, node lost, restart); a FIFO nobody reads,
// a reader that stops reading, a full disk and a path that cannot be used.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../support/free_port.hpp"
#include "harness.hpp"

using namespace ddprun::testing;
using nlohmann::json;

namespace {

/// Every line of `path` as JSON (a line that is not fails the test).
std::vector<json> events_in(const std::filesystem::path& path) {
  std::vector<json> events;
  for (const std::string& line : split_lines(read_file(path))) {
    try {
      events.push_back(json::parse(line));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not JSON: " << line << " (" << e.what() << ")";
    }
  }
  return events;
}

std::vector<std::string> kinds_of(const std::vector<json>& events) {
  std::vector<std::string> kinds;
  for (const json& e : events) kinds.push_back(e.at("event").get<std::string>());
  return kinds;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
  return text;
}

std::vector<json> of_kind(const std::vector<json>& events, const std::string& kind) {
  std::vector<json> found;
  for (const json& e : events) {
    if (e.at("event") == kind) found.push_back(e);
  }
  return found;
}

bool has_kind(const std::filesystem::path& path, const std::string& kind, int count = 1) {
  if (!std::filesystem::exists(path)) return false;
  int seen = 0;
  for (const std::string& line : split_lines(read_file(path))) {
    if (line.find("\"event\":\"" + kind + "\"") != std::string::npos) ++seen;
  }
  return seen >= count;
}

}  // namespace

TEST(EventLog, AFailureAndARestartAreRecordedInOrderWithPidsAndExitStatus) {
  TempDir dir;
  const auto path = dir.path() / "events.jsonl";
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--events",
                                path.string(), test_worker_binary(), "restart", dir.str(), "1"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  std::vector<json> events = events_in(path);
  // Rank 1 fails, rank 0 is stopped; the order of the two starts (and of the two last exits) is
  // the spawn's and the kernel's: compare kinds, then ranks where the order is fixed.
  EXPECT_EQ(joined(kinds_of(events)),
            "job_started worker_started worker_started worker_exited worker_exited restart "
            "worker_started worker_started worker_exited worker_exited job_finished");
  ASSERT_EQ(events.size(), 11u);
  EXPECT_EQ(events[0].at("nproc"), 2);
  EXPECT_EQ(events[0].at("max_restarts"), 1);
  EXPECT_EQ(events[1].at("rank"), 0);
  EXPECT_EQ(events[2].at("rank"), 1);
  const json& failed = events[3];
  EXPECT_EQ(failed.at("rank"), 1);
  EXPECT_EQ(failed.at("pid"), events[2].at("pid")) << "the exit names the pid that started";
  EXPECT_EQ(failed.at("exitcode"), 1);
  EXPECT_EQ(failed.at("description"), "exit code 1");
  EXPECT_EQ(failed.at("failed"), true);
  const json& stopped = events[4];
  EXPECT_EQ(stopped.at("rank"), 0);
  EXPECT_EQ(stopped.at("pid"), events[1].at("pid"));
  EXPECT_EQ(stopped.at("exitcode"), -SIGTERM);
  EXPECT_EQ(stopped.at("failed"), false);
  EXPECT_EQ(stopped.at("stop_signal_sent"), SIGTERM);
  EXPECT_EQ(events[5].at("restart_count"), 1);
  EXPECT_EQ(events[5].at("reason"), "rank 1 failed (exit code 1)");
  for (int i : {6, 7}) EXPECT_EQ(events[static_cast<std::size_t>(i)].at("attempt"), 1);
  for (int i : {8, 9}) {
    EXPECT_EQ(events[static_cast<std::size_t>(i)].at("exitcode"), 0);
    EXPECT_EQ(events[static_cast<std::size_t>(i)].at("attempt"), 1);
  }
  EXPECT_EQ(events[10].at("exit_status"), 0);
  EXPECT_EQ(events[10].at("restarts"), 1);
  double previous = 0;
  for (const json& e : events) {
    EXPECT_EQ(e.at("node_rank"), 0);
    EXPECT_GE(e.at("time").get<double>(), previous) << e.dump();
    previous = e.at("time").get<double>();
  }
}

TEST(EventLog, ARunningJobsEventsAreInTheFileAlreadyAndARerunAppends) {
  TempDir dir;
  const auto path = dir.path() / "events.jsonl";
  {
    Launch launch({"--standalone", "--nproc-per-node", "2", "--events", path.string(), test_worker_binary(), "pid",
                   dir.str()});
    // tail -f follows the job: both starts are there while the workers run.
    EXPECT_TRUE(eventually([&] { return has_kind(path, "worker_started", 2); })) << read_file(path);
    EXPECT_FALSE(has_kind(path, "job_finished"));
    launch.send(SIGTERM);
    Outcome outcome = launch.wait();
    EXPECT_EQ(outcome.exit_status, 128 + SIGTERM) << outcome.err;
  }
  std::vector<json> first = events_in(path);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.back().at("event"), "job_finished");
  EXPECT_EQ(first.back().at("exit_status"), 128 + SIGTERM);

  Outcome again = run_ddprun({"--standalone", "--events", path.string(), "/bin/true"});
  EXPECT_EQ(again.exit_status, 0) << again.err;
  std::vector<json> both = events_in(path);
  EXPECT_EQ(both.size(), first.size() + 4) << "appended: job_started, worker_started/exited, job_finished";
  EXPECT_EQ(of_kind(both, "job_started").size(), 2u);
}

TEST(EventLog, AHangIsRecordedWithItsStackFilesAndTheRestartItCauses) {
  TempDir dir;
  const auto path = dir.path() / "events.jsonl";
  // Workers that sleep: no output, no CPU, no progress. Hung after 2 s, restarted once, hung again.
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--hang-timeout", "2", "--hang-action",
                                "restart", "--max-restarts", "1", "--events", path.string(), "--log-dir",
                                (dir.path() / "logs").string(), test_worker_binary(), "pid", dir.str()});
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  std::vector<json> events = events_in(path);
  std::vector<std::string> kinds = kinds_of(events);
  std::erase(kinds, "stacks_written");  // as many as the capture could write: checked below
  EXPECT_EQ(joined(kinds),
            "job_started worker_started worker_started hang_detected worker_exited worker_exited restart "
            "worker_started worker_started hang_detected worker_exited worker_exited job_finished");
  for (const json& hang : of_kind(events, "hang_detected")) {
    EXPECT_EQ(hang.at("action"), "restart");
    EXPECT_GE(hang.at("idle_seconds").get<double>(), 2.0);
  }
  const std::vector<json> restarts = of_kind(events, "restart");
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].at("reason").get<std::string>().rfind("hang: no rank made progress for ", 0), 0u)
      << restarts[0].dump();
  EXPECT_EQ(events.back().at("exit_status"), 1);
  for (const json& stacks : of_kind(events, "stacks_written")) {
    EXPECT_TRUE(std::filesystem::exists(stacks.at("file").get<std::string>())) << stacks.dump();
    EXPECT_TRUE(stacks.at("rank") == 0 || stacks.at("rank") == 1) << stacks.dump();
  }
}

TEST(EventLog, TwoAgentsOnLoopbackRecordRoundsNodesJoinedAndANodeLost) {
  TempDir dir;
  const auto path = dir.path() / "events.jsonl";  // shared: each agent appends whole lines
  const std::vector<std::string> flags = {"--nnodes=1:2", "--rdzv-backend=c10d",
                                          "--rdzv-endpoint=127.0.0.1:" + std::to_string(free_port()),
                                          "--rdzv-id=events", "--rdzv-conf=last_call_timeout=1,join_timeout=60",
                                          "--events", path.string()};
  auto node = [&](const std::string& tag) {
    std::vector<std::string> args = flags;
    for (const std::string& a : {test_worker_binary(), std::string("pid"), (dir.path() / tag).string()}) args.push_back(a);
    std::filesystem::create_directories(dir.path() / tag);
    return args;
  };
  // a first: the first agent to bind the endpoint hosts the store, and b, the one that leaves,
  // must not take it along. a binds it before it records job_started.
  Launch a(node("a"));
  ASSERT_TRUE(eventually([&] { return has_kind(path, "job_started"); })) << read_file(path);
  Launch b(node("b"));
  // A round of both nodes (the first, or the one after b joined a round of one).
  auto round_of_two = [&] {
    for (const json& e : events_in(path)) {
      if (e.at("event") == "round_formed" && e.at("nodes") == 2 && has_kind(path, "worker_started", 2)) return true;
    }
    return false;
  };
  ASSERT_TRUE(eventually(round_of_two, std::chrono::seconds(60))) << read_file(path);
  b.send(SIGTERM);  // b leaves: a records it lost at once, and goes on alone in a new round
  Outcome b_out = b.wait();
  EXPECT_EQ(b_out.exit_status, 128 + SIGTERM) << b_out.err;
  auto lost = [&] { return has_kind(path, "node_lost") && has_kind(path, "restart"); };
  EXPECT_TRUE(eventually(lost, std::chrono::seconds(60))) << read_file(path);
  EXPECT_TRUE(eventually([&] {
    auto rounds = of_kind(events_in(path), "round_formed");
    return !rounds.empty() && rounds.back().at("nodes") == 1;
  }, std::chrono::seconds(60))) << read_file(path);
  a.send(SIGTERM);
  Outcome a_out = a.wait();
  EXPECT_EQ(a_out.exit_status, 128 + SIGTERM) << a_out.err;

  std::vector<json> events = events_in(path);
  EXPECT_EQ(of_kind(events, "job_started").size(), 2u) << "one per agent";
  EXPECT_EQ(of_kind(events, "job_finished").size(), 2u);
  // Each node joined once as a node of a round, as each agent saw it: node ranks 0 and 1.
  std::vector<int> joined_ranks;
  for (const json& e : of_kind(events, "node_joined")) joined_ranks.push_back(e.at("node_rank"));
  EXPECT_NE(std::find(joined_ranks.begin(), joined_ranks.end(), 0), joined_ranks.end());
  EXPECT_NE(std::find(joined_ranks.begin(), joined_ranks.end(), 1), joined_ranks.end());
  // b's leaving as a recorded: the node it was, how, and why.
  std::vector<json> lost_events = of_kind(events, "node_lost");
  ASSERT_EQ(lost_events.size(), 1u) << "a saw b go; no agent records its own leaving (that is its job_finished)";
  const json& gone = lost_events.front();
  EXPECT_EQ(gone.at("how"), "left") << gone.dump();
  EXPECT_NE(gone.at("reason").get<std::string>().find("left"), std::string::npos) << gone.dump();
  EXPECT_EQ(gone.at("node").get<std::string>().find("-" + std::to_string(b.pid()) + "-") != std::string::npos, true)
      << gone.dump();
  const json restart = of_kind(events, "restart").back();
  EXPECT_NE(restart.at("reason").get<std::string>().find("left"), std::string::npos) << restart.dump();
  for (const json& e : of_kind(events, "worker_started")) EXPECT_TRUE(e.contains("node_rank")) << e.dump();
}

TEST(EventLog, AFifoNobodyReadsDoesNotHoldTheJobAndALateReaderGetsItFromTheStart) {
  TempDir dir;
  const auto fifo = dir.path() / "events.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Nobody ever reads: the job runs and ends as without --events.
  Outcome alone = run_ddprun({"--standalone", "--nproc-per-node", "2", "--events", fifo.string(), "/bin/true"});
  EXPECT_EQ(alone.exit_status, 0) << alone.err;

  // A reader that comes while the job runs reads its events from the start, to the end.
  Launch launch({"--standalone", "--nproc-per-node", "2", "--events", fifo.string(), test_worker_binary(), "pid",
                 dir.str()});
  ASSERT_TRUE(eventually([&] {
    return std::filesystem::exists(dir.path() / "pid_0") && std::filesystem::exists(dir.path() / "pid_1");
  }));
  int reader = ::open(fifo.c_str(), O_RDONLY | O_CLOEXEC);  // a writer exists: no wait
  ASSERT_GE(reader, 0);
  launch.send(SIGTERM);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(reader, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(reader);  // end of file: ddprun closed it
  Outcome outcome = launch.wait();
  EXPECT_EQ(outcome.exit_status, 128 + SIGTERM) << outcome.err;
  std::vector<std::string> kinds;
  for (const std::string& line : split_lines(text)) kinds.push_back(json::parse(line).at("event"));
  EXPECT_EQ(joined(kinds), "job_started worker_started worker_started worker_exited worker_exited job_finished");
}

// Issue 25: a reader that opens the FIFO after a short job has ended in ddprun (0.5 s after it
// started) still reads every event, from job_started to job_finished: ddprun waits for it (up to
// 2 s). Before, ddprun exited at once and the events in the pipe went with it: the reader read none.
TEST(EventLog, AReaderThatOpensTheFifoAfterAShortJobEndedGetsEveryEvent) {
  TempDir dir;
  const auto fifo = dir.path() / "events.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Launch launch({"--standalone", "--nproc-per-node", "2", "--events", fifo.string(), "/bin/true"});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Non-blocking, so that a FIFO ddprun no longer holds open reads as its end, not as a wait for ever.
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  std::string text;
  char buffer[4096];
  for (const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < give_up;) {
    const ssize_t n = ::read(reader, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;  // end of file: no writer (ddprun closed it, or was never there)
    } else {
      pollfd ready{reader, POLLIN, 0};
      ::poll(&ready, 1, 100);
    }
  }
  ::close(reader);
  Outcome outcome = launch.wait();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  std::vector<std::string> kinds;
  for (const std::string& line : split_lines(text)) kinds.push_back(json::parse(line).at("event"));
  EXPECT_EQ(joined(kinds), "job_started worker_started worker_started worker_exited worker_exited job_finished");
  EXPECT_EQ(outcome.err.find("lost"), std::string::npos) << outcome.err;
}

// Issue 25: a FIFO nobody ever opens: ddprun ends all the same (after its 2 s wait) and says, in
// one line, how many events were lost.
TEST(EventLog, AFifoNobodyEverReadsEndsTheJobAndSaysTheEventsWereLost) {
  TempDir dir;
  const auto fifo = dir.path() / "events.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Launch launch({"--standalone", "--nproc-per-node", "2", "--events", fifo.string(), "/bin/true"});
  Outcome outcome = launch.wait(std::chrono::seconds(30));
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: warning: no reader took the last 6 event(s) of the event log " + fifo.string() +
                             " (a FIFO) within 2 s; they are lost\n"),
            std::string::npos)
      << outcome.err;
}

TEST(EventLog, AReaderThatStopsReadingNeverStopsTheJob) {
  TempDir dir;
  const auto fifo = dir.path() / "events.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  ASSERT_GE(::fcntl(reader, F_SETPIPE_SZ, 4096), 4096);  // one page: a few events fill it
  // 16 workers: 34 events, about twice what the pipe takes; the reader never reads.
  const auto start = std::chrono::steady_clock::now();
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "16", "--events", fifo.string(), "/bin/true"});
  ::close(reader);
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_NE(outcome.err.find("event(s) were not written to the event log " + fifo.string()), std::string::npos)
      << outcome.err;
}

TEST(EventLog, AFullDiskIsSaidOnceAndTheJobGoesOn) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--events", "/dev/full", "/bin/true"});
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  const std::string line =
      "ddprun: warning: cannot write the event log /dev/full: No space left on device; the job goes on without it\n";
  const auto first = outcome.err.find(line);
  EXPECT_NE(first, std::string::npos) << outcome.err;
  EXPECT_EQ(outcome.err.find(line, first + 1), std::string::npos) << "said once:\n" << outcome.err;
}

TEST(EventLog, AFileThatCannotBeOpenedFailsTheJobBeforeAnyWorkerStarts) {
  TempDir dir;
  const auto path = dir.path() / "missing" / "events.jsonl";
  Outcome outcome = run_ddprun({"--standalone", "--events", path.string(), test_worker_binary(), "env", dir.str()});
  EXPECT_EQ(outcome.exit_status, 1);
  EXPECT_EQ(outcome.err, "ddprun: cannot open the event log " + path.string() +
                             " (--events): No such file or directory\n");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "env_0")) << "a worker ran";
}

// HangWatch on a real loop with real child processes: a hang newly found is reported once (the
// callback with the idle time, a hang_detected event, the count on the monitor); a capture writes
// each rank's stacks file and a stacks_written event and then calls back; with --hang-action report
// only node 0 gathers the whole job's stacks through the job board (here the in-process store);
// and fill() gives the failure summary the stacks' place and the digest.
#include "launcher/observe/hang_watch.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/observe/hang_summary.hpp"
#include "launcher/observe/stack_capture.hpp"
#include "launcher/observe/status_monitor.hpp"
#include "observer_node.hpp"
#include "rendezvous/job_board.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using testing_support::ObserverNode;
using testing_support::ObserverNodeOptions;
using testing_support::run_ready;
using testing_support::run_until;
using testing_support::ScratchFolder;
using testing_support::SleepChild;

bool can_capture() { return find_unwinder() || ::access("/usr/bin/gdb", X_OK) == 0; }

/// A sample of `pids` as running local ranks 0.. (rank_base `base`), at unix time `at`.
NodeStatus sample(const std::vector<pid_t>& pids, double at, int base = 0, int attempt = 0) {
  NodeStatus node;
  node.sampled_at = at;
  node.attempt = attempt;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    RankStatus rank;
    rank.rank = base + static_cast<int>(i);
    rank.local_rank = static_cast<int>(i);
    rank.pid = pids[i];
    rank.state = RankState::running;
    node.ranks.push_back(rank);
  }
  return node;
}

struct Calls {
  std::vector<std::pair<double, double>> hangs;  ///< idle, timeout
  int captured = 0;
};

class Hang : public ::testing::Test {
 protected:
  /// The node's observers and its hang watch (--hang-timeout 10).
  HangWatch& make(ObserverNodeOptions options, HangAction action = HangAction::report) {
    options.samples_wanted = true;  // --hang-timeout wants samples from the start
    node_ = std::make_unique<ObserverNode>(io_, dir_.root() / ("logs" + std::to_string(nodes_made_++)), options);
    HangWatchSettings settings{.timeout_s = 10, .action = action, .host = "hosty"};
    HangWatch::Callbacks callbacks{
        .on_hang = [this](double idle, double timeout) { calls_.hangs.emplace_back(idle, timeout); },
        .on_captured = [this] { ++calls_.captured; }};
    watch_ = std::make_unique<HangWatch>(settings, node_->attempt, node_->logs, node_->events, node_->status,
                                         node_->stacks, node_->board, callbacks);
    return *watch_;
  }

  ScratchFolder dir_{"hang_watch"};
  // The store before the loop: coroutines the loop still holds when it goes reach into the store.
  std::unique_ptr<rendezvous::InProcessStore> store_;
  boost::asio::io_context io_;
  int nodes_made_ = 0;
  std::unique_ptr<ObserverNode> node_;
  std::unique_ptr<HangWatch> watch_;
  Calls calls_;
};

TEST_F(Hang, AHangNewlyFoundIsReportedOnceWithItsIdleTime) {
  SleepChild child;
  HangWatch& watch = make({.workers = {child.pid()}});
  watch.on_sample(sample({child.pid()}, 1000));
  watch.on_sample(sample({child.pid()}, 1005));
  EXPECT_TRUE(calls_.hangs.empty());
  watch.on_sample(sample({child.pid()}, 1012));
  watch.on_sample(sample({child.pid()}, 1013));  // still hung: not found again

  ASSERT_EQ(calls_.hangs.size(), 1u);
  EXPECT_DOUBLE_EQ(calls_.hangs[0].first, 12);
  EXPECT_DOUBLE_EQ(calls_.hangs[0].second, 10);
  const auto found = node_->sink.of(JobEventKind::hang_detected);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_DOUBLE_EQ(found[0].detail["idle_seconds"].get<double>(), 12);
  EXPECT_DOUBLE_EQ(found[0].detail["timeout_seconds"].get<double>(), 10);
  EXPECT_EQ(found[0].detail["action"], "report");
  ASSERT_NE(node_->status.monitor(), nullptr);
  EXPECT_EQ(node_->status.monitor()->hangs(), 1);

  // Something happens (a new process for rank 0), then nothing again: a second hang.
  SleepChild restarted;
  watch.on_sample(sample({restarted.pid()}, 1014));
  watch.on_sample(sample({restarted.pid()}, 1025));
  EXPECT_EQ(calls_.hangs.size(), 2u);
  EXPECT_EQ(node_->status.monitor()->hangs(), 2);
  EXPECT_EQ(node_->status.monitor()->latest().hangs, 2);  // every sample carries the count
}

TEST_F(Hang, NoTimeoutNoHang) {
  SleepChild child;
  node_ = std::make_unique<ObserverNode>(io_, dir_.root() / "logs", ObserverNodeOptions{.workers = {child.pid()}});
  HangWatch watch({.timeout_s = 0}, node_->attempt, node_->logs, node_->events, node_->status, node_->stacks,
                  node_->board, {.on_hang = [this](double idle, double timeout) { calls_.hangs.emplace_back(idle, timeout); },
                                 .on_captured = [] {}});
  watch.on_sample(sample({child.pid()}, 1000));
  watch.on_sample(sample({child.pid()}, 5000));
  EXPECT_TRUE(calls_.hangs.empty());
  EXPECT_TRUE(node_->sink.of(JobEventKind::hang_detected).empty());
}

TEST_F(Hang, ACaptureWritesEachRanksFileAndAnEventThenCallsBack) {
  if (!can_capture()) GTEST_SKIP() << "neither ddprun-unwind nor gdb";
  SleepChild rank0, rank1;
  AttemptView attempt;
  attempt.attempt = 1;
  attempt.rank_base = 6;
  HangWatch& watch = make({.attempt = attempt, .workers = {rank0.pid(), rank1.pid()}});
  watch.on_sample(sample({rank0.pid(), rank1.pid()}, 1000, 6, 1));
  watch.on_sample(sample({rank0.pid(), rank1.pid()}, 1011, 6, 1));
  ASSERT_EQ(calls_.hangs.size(), 1u);

  ::testing::internal::CaptureStderr();
  watch.capture();
  const bool captured = run_until(io_, [&] { return calls_.captured > 0; });
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(captured);
  run_ready(io_);
  EXPECT_EQ(calls_.captured, 1);

  const fs::path stacks = node_->logs.run_dir() / "attempt_1" / "stacks";
  const auto written = node_->sink.of(JobEventKind::stacks_written);
  ASSERT_EQ(written.size(), 2u);
  const pid_t pids[] = {rank0.pid(), rank1.pid()};
  for (int i = 0; i < 2; ++i) {
    const fs::path file = stacks / ("rank_" + std::to_string(6 + i) + ".txt");
    ASSERT_TRUE(fs::is_regular_file(file)) << file;
    std::stringstream text;
    text << std::ifstream(file).rdbuf();
    EXPECT_EQ(text.str().rfind("rank " + std::to_string(6 + i) + " (pid " + std::to_string(pids[i]) + ") on hosty", 0), 0u)
        << text.str();
    const JobEvent* event = nullptr;
    for (const JobEvent& candidate : written) {
      if (candidate.rank == 6 + i) event = &candidate;
    }
    ASSERT_NE(event, nullptr) << "rank " << 6 + i;
    EXPECT_EQ(event->pid, pids[i]);
    EXPECT_EQ(event->detail["file"], file.string());
  }
  EXPECT_NE(printed.find("hang: every rank's stacks: " + (stacks / "rank_<rank>.txt").string()), std::string::npos)
      << printed;

  HangReport report;
  watch.fill(report);
  EXPECT_EQ(report.stacks, (stacks / "rank_<rank>.txt").string());
  EXPECT_EQ(report.host, "hosty");
  EXPECT_FALSE(report.digest.empty());
  for (const std::string& line : report.digest) EXPECT_NE(printed.find("hang: " + line), std::string::npos) << line;
}

/// The stack requests on the board of `round`: 0 when none. Read after a status `node` publishes
/// behind whatever its board had queued, so that a request queued before is there by then.
std::int64_t stack_requests(boost::asio::io_context& io, rendezvous::InProcessStore& store, ObserverNode& node,
                            int round) {
  rendezvous::JobBoard::Options options;
  options.stores = testing_support::in_process_factory(store);
  options.run_id = "run";
  rendezvous::JobBoard reader(io, options);
  node.status.monitor()->sample_now();  // published on the node's board, behind what it queued
  bool published = false;
  EXPECT_TRUE(run_until(io, [&] {
    if (published) return true;
    std::optional<rendezvous::BoardRead> read;
    reader.read_statuses(round, 2, [&](rendezvous::BoardRead result) { read = std::move(result); });
    if (!run_until(io, [&] { return read.has_value(); })) return false;
    const int self = node.attempt.group_rank;
    published = read->error.empty() && read->entries.at(static_cast<std::size_t>(self)).has_value();
    return published;
  }));
  std::optional<std::int64_t> latest;
  reader.latest_stack_request(round, [&](std::int64_t request, const std::string& error) {
    EXPECT_EQ(error, "");
    latest = request;
  });
  EXPECT_TRUE(run_until(io, [&] { return latest.has_value(); }));
  return latest.value_or(-1);
}

TEST_F(Hang, WithActionReportOnlyNodeZeroGathersTheJobsStacks) {
  if (!can_capture()) GTEST_SKIP() << "neither ddprun-unwind nor gdb";
  store_ = std::make_unique<rendezvous::InProcessStore>(io_.get_executor());
  int round = 0;
  for (int group_rank : {1, 0}) {
    ++round;  // each node on a board of its own
    SCOPED_TRACE("group rank " + std::to_string(group_rank));
    SleepChild child;
    AttemptView attempt;
    attempt.group_rank = group_rank;
    attempt.group_world_size = 2;
    attempt.world_size = 2;
    attempt.rank_base = group_rank;
    HangWatch& watch = make({.attempt = attempt, .workers = {child.pid()}});
    node_->status.attempt_started();
    node_->board.open(round, 2, testing_support::in_process_factory(*store_));
    watch.on_sample(sample({child.pid()}, 1000, group_rank));
    watch.on_sample(sample({child.pid()}, 1011, group_rank));
    ASSERT_EQ(calls_.hangs.size(), 1u);
    calls_ = {};

    ::testing::internal::CaptureStderr();
    watch.capture();
    const bool captured = run_until(io_, [&] { return calls_.captured > 0; });
    ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(captured);  // at once: report does not wait for the other nodes
    EXPECT_EQ(stack_requests(io_, *store_, *node_, round), group_rank == 0 ? 1 : 0);

    node_->board.close();  // node 0's gather ends with the board, while its watch is there to hear it
    run_ready(io_);
    watch_.reset();
    node_.reset();
    calls_ = {};
  }
}

}  // namespace
}  // namespace ddprun::launcher

// EventRecorder on a real loop: what it stamps (the time, this node's rank, but not the rank of the
// node a node_joined / node_lost is about), the restart event's reason in each of its three cases,
// the nodes a round brings and takes away, a lost node reported once, and --events: its file gets
// the lines, and a path that cannot be opened fails at once, naming it.
#include "launcher/observe/event_recorder.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/base/errors.hpp"
#include "launcher/base/signal_names.hpp"
#include "observer_rig.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

using testing_support::run_until;
using testing_support::ScratchFolder;

/// A sink of the test's: every event, as handed on.
struct Collected : JobEventSink {
  void record(const JobEvent& event) override { events.push_back(event); }
  std::vector<JobEvent> of(JobEventKind kind) const {
    std::vector<JobEvent> found;
    for (const JobEvent& event : events) {
      if (event.kind == kind) found.push_back(event);
    }
    return found;
  }
  std::vector<JobEvent> events;
};

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

rendezvous::NodeInfo node(const std::string& id) {
  return {.id = id, .host_name = id + "-host", .addr = "10.0.0." + std::to_string(id.size()), .nproc = 2};
}

rendezvous::RoundDecision round_of(int round, std::vector<rendezvous::NodeInfo> nodes) {
  return {.round = round, .restart_count = 0, .nodes = std::move(nodes), .error = ""};
}

class Recorder : public ::testing::Test {
 protected:
  EventRecorder& make(JobFacts facts = {}) {
    recorder_ = std::make_unique<EventRecorder>(io_, std::move(facts), attempt_, [this](const std::string& line) {
      warnings_.push_back(line);
    });
    recorder_->add_sink(&sink_);
    return *recorder_;
  }
  JobFacts multi_node() const {
    JobFacts facts;
    facts.multi_node = true;
    facts.min_nodes = 1;
    facts.max_nodes = 4;
    return facts;
  }

  boost::asio::io_context io_;
  AttemptView attempt_;
  Collected sink_;
  std::vector<std::string> warnings_;
  std::unique_ptr<EventRecorder> recorder_;
};

TEST_F(Recorder, StampsTheTimeAndThisNodesRankButNotTheRankOfANodeAnEventIsAbout) {
  attempt_.group_rank = 3;
  JobFacts facts = multi_node();
  facts.static_node_rank = 3;
  EventRecorder& events = make(facts);
  events.job_started();
  const double before = unix_now();
  events.record({.kind = JobEventKind::straggler, .rank = 7});
  const double after = unix_now();
  events.record({.time = 12.5, .kind = JobEventKind::straggler, .node_rank = 1, .rank = 2});
  events.record({.kind = JobEventKind::node_joined});
  events.record({.kind = JobEventKind::node_lost, .node_rank = 5});

  ASSERT_EQ(sink_.events.size(), 5u);
  EXPECT_EQ(sink_.events[0].node_rank, 3);  // a static job's rank, known from the start
  const JobEvent& stamped = sink_.events[1];
  EXPECT_GE(stamped.time, before - 1e-6);  // stamped to the microsecond (job_event.hpp)
  EXPECT_LE(stamped.time, after);
  EXPECT_EQ(stamped.node_rank, 3);
  EXPECT_EQ(sink_.events[2].time, 12.5);  // given: kept
  EXPECT_EQ(sink_.events[2].node_rank, 1);
  EXPECT_EQ(sink_.events[3].node_rank, -1);  // about another node: not this node's rank
  EXPECT_GT(sink_.events[3].time, 0);
  EXPECT_EQ(sink_.events[4].node_rank, 5);
  // The ring the status endpoint serves holds the same events.
  ASSERT_EQ(events.recent().events().size(), 5u);
  EXPECT_EQ(events.recent().events()[1].node_rank, 3);
}

TEST_F(Recorder, ADynamicJobsRankIsUnknownUntilARoundSaysIt) {
  EventRecorder& events = make(multi_node());
  events.job_started();
  events.record({.kind = JobEventKind::straggler});
  attempt_.group_rank = 1;
  attempt_.group_world_size = 2;
  events.round_formed(round_of(0, {node("a"), node("b")}));
  events.record({.kind = JobEventKind::straggler});

  const auto stragglers = sink_.of(JobEventKind::straggler);
  ASSERT_EQ(stragglers.size(), 2u);
  EXPECT_EQ(sink_.events[0].node_rank, -1);  // job_started
  EXPECT_EQ(stragglers[0].node_rank, -1);
  EXPECT_EQ(stragglers[1].node_rank, 1);
  const auto formed = sink_.of(JobEventKind::round_formed);
  ASSERT_EQ(formed.size(), 1u);
  EXPECT_EQ(formed[0].node_rank, 1);
  EXPECT_EQ(formed[0].detail["group_rank"], 1);
}

TEST_F(Recorder, TheFirstGroupIsNoRestartAndARestartAfterAFailureNamesTheFailedRank) {
  EventRecorder& events = make();
  events.group_starting(std::nullopt);
  EXPECT_TRUE(sink_.of(JobEventKind::restart).empty());

  attempt_.restarts = 1;
  events.group_starting(std::make_pair(2, -9));
  const auto restarts = sink_.of(JobEventKind::restart);
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].detail["restart_count"], 1);
  EXPECT_EQ(restarts[0].detail["reason"], "rank 2 failed (" + describe_exitcode(-9) + ")");
  EXPECT_FALSE(restarts[0].detail.contains("round"));
}

TEST_F(Recorder, ARestartWithoutAFailureAfterAHangSaysSo) {
  EventRecorder& events = make();
  events.group_starting(std::nullopt);
  events.worker_started(0, 4242);
  events.record({.kind = JobEventKind::hang_detected, .detail = {{"idle_seconds", 31.6}, {"action", "restart"}}});
  attempt_.restarts = 1;
  events.group_starting(std::nullopt);

  // A hang of an attempt before the last one is no reason for this restart.
  events.worker_started(0, 4243);
  attempt_.restarts = 2;
  events.group_starting(std::nullopt);

  const auto restarts = sink_.of(JobEventKind::restart);
  ASSERT_EQ(restarts.size(), 2u);
  EXPECT_EQ(restarts[0].detail["reason"], "hang: no rank made progress for 32 s (--hang-action restart)");
  EXPECT_FALSE(restarts[1].detail.contains("reason"));
}

TEST_F(Recorder, AMultiNodeRestartGivesTheRoundAndWhyTheLastRoundEnded) {
  EventRecorder& events = make(multi_node());
  events.job_started();
  attempt_.group_world_size = 2;
  events.round_formed(round_of(0, {node("a"), node("b")}));
  events.group_starting(std::nullopt);
  events.round_ended({.kind = rendezvous::EndKind::failure, .node = "b", .message = "rank 3 on b-host failed"}, "a");
  attempt_.attempt = 1;
  attempt_.restarts = 1;
  events.round_formed(round_of(1, {node("a"), node("b")}));
  events.group_starting(std::make_pair(0, 1));  // a first failure here does not replace the round's reason

  const auto restarts = sink_.of(JobEventKind::restart);
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].detail["reason"], "rank 3 on b-host failed");
  EXPECT_EQ(restarts[0].detail["round"], 1);
  EXPECT_EQ(restarts[0].detail["restart_count"], 1);
}

TEST_F(Recorder, ARoundRecordsTheNodesItBroughtAndThoseTheLastRoundHadAndItLacks) {
  EventRecorder& events = make(multi_node());
  events.job_started();
  attempt_.group_world_size = 2;
  events.round_formed(round_of(0, {node("a"), node("b")}));
  const auto first_joined = sink_.of(JobEventKind::node_joined);
  ASSERT_EQ(first_joined.size(), 2u);
  EXPECT_EQ(first_joined[0].node_rank, 0);
  EXPECT_EQ(first_joined[0].detail["node"], "a");
  EXPECT_EQ(first_joined[1].node_rank, 1);
  EXPECT_EQ(first_joined[1].detail["host"], "b-host");
  EXPECT_EQ(first_joined[1].detail["round"], 0);
  EXPECT_TRUE(sink_.of(JobEventKind::node_lost).empty());

  sink_.events.clear();
  events.round_formed(round_of(1, {node("b"), node("c")}));  // a gone, c new, b stays (now rank 0)
  const auto lost = sink_.of(JobEventKind::node_lost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].node_rank, 0);  // its rank in the round it was in
  EXPECT_EQ(lost[0].detail["node"], "a");
  EXPECT_EQ(lost[0].detail["reason"], "not in round 1");
  const auto joined = sink_.of(JobEventKind::node_joined);
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].detail["node"], "c");
  EXPECT_EQ(joined[0].node_rank, 1);
  EXPECT_EQ(joined[0].detail["round"], 1);
}

TEST_F(Recorder, ALostNodeIsReportedOnceAndThisNodesOwnEndIsNotALoss) {
  EventRecorder& events = make(multi_node());
  events.job_started();
  attempt_.group_world_size = 3;
  events.round_formed(round_of(0, {node("a"), node("b"), node("c")}));
  sink_.events.clear();

  const rendezvous::RoundEnd lost_c{.kind = rendezvous::EndKind::lost, .node = "c", .message = "c stopped heart-beating"};
  events.round_ended(lost_c, "a");
  events.round_ended(lost_c, "a");  // the same end, read again
  events.round_ended({.kind = rendezvous::EndKind::left, .node = "a", .message = "a was stopped"}, "a");  // this node
  events.round_ended({.kind = rendezvous::EndKind::failure, .node = "b", .message = "rank 1 failed"}, "a");
  events.round_formed(round_of(1, {node("a"), node("b")}));  // c not in it: already said

  const auto lost = sink_.of(JobEventKind::node_lost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].node_rank, 2);
  EXPECT_EQ(lost[0].detail["node"], "c");
  EXPECT_EQ(lost[0].detail["reason"], "c stopped heart-beating");
  EXPECT_EQ(lost[0].detail["how"], "lost");

  // In the next round, c may be lost again (after it came back).
  events.round_formed(round_of(2, {node("a"), node("b"), node("c")}));
  events.round_ended(lost_c, "a");
  EXPECT_EQ(sink_.of(JobEventKind::node_lost).size(), 2u);
}

TEST_F(Recorder, TheEventsFileGetsALinePerEvent) {
  ScratchFolder dir("event_recorder");
  const std::string file = (dir.root() / "events.jsonl").string();
  EventRecorder& events = make();
  events.open_log(file);
  events.job_started();
  events.worker_started(0, 4242);
  events.worker_exited({.local_rank = 0, .pid = 4242, .exitcode = 1, .failed = true});
  events.job_finished(1, 0);
  bool drained = false;
  events.when_drained([&] { drained = true; }, std::chrono::seconds(30));
  ASSERT_TRUE(run_until(io_, [&] { return drained; }));

  std::ifstream in(file);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["event"], "job_started");
  EXPECT_EQ(lines[1]["event"], "worker_started");
  EXPECT_EQ(lines[1]["pid"], 4242);
  EXPECT_EQ(lines[2]["event"], "worker_exited");
  EXPECT_EQ(lines[2]["exitcode"], 1);
  EXPECT_EQ(lines[2]["failed"], true);
  EXPECT_EQ(lines[3]["event"], "job_finished");
  EXPECT_EQ(sink_.events.size(), 4u);  // the other sinks still get them
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(Recorder, AnEventsFileThatCannotBeOpenedFailsAtOnceNamingIt) {
  ScratchFolder dir("event_recorder");
  const std::string file = (dir.root() / "no-such-folder" / "events.jsonl").string();
  EventRecorder& events = make();
  try {
    events.open_log(file);
    FAIL() << "no LaunchError";
  } catch (const LaunchError& error) {
    EXPECT_NE(std::string(error.what()).find(file), std::string::npos) << error.what();
  }
}

TEST_F(Recorder, WithoutAnEventsFileDrainingIsImmediate) {
  EventRecorder& events = make();
  events.open_log("");  // no --events
  bool drained = false;
  events.when_drained([&] { drained = true; }, std::chrono::seconds(30));
  EXPECT_TRUE(drained);
}

}  // namespace
}  // namespace ddprun::launcher

// The status and event schemas: every field survives a round trip, missing fields read as their
// defaults (an older agent's JSON), and a bad shape is an error, not a silent zero.
#include <gtest/gtest.h>

#include "launcher/observe/job_event.hpp"
#include "launcher/observe/status_json.hpp"

namespace ddprun::launcher {
namespace {

using nlohmann::json;

NodeStatus sample_node() {
  RankStatus rank;
  rank.rank = 5;
  rank.local_rank = 1;
  rank.pid = 4242;
  rank.state = RankState::failed;
  rank.exitcode = -9;
  rank.cpu_percent = 97.5;
  rank.cpu_seconds = 12.25;
  rank.rss_bytes = 123456789012ull;
  rank.output_age_seconds = 3.5;
  rank.straggler = true;
  rank.progress = ProgressSample{42, 4200, "epoch 1 loss 0.5 \xc3\xa9", 0.75, 10.5, 1050};
  NodeStatus node;
  node.node_rank = 2;
  node.host = "h2";
  node.attempt = 3;
  node.restarts = 1;
  node.hangs = 4;
  node.sampled_at = 1700000000.125;
  node.ranks = {rank, RankStatus{}};
  node.warm = {WarmInterpreter{0, 5151, true}, WarmInterpreter{1, 5152, false}};
  return node;
}

TEST(StatusJson, EveryFieldRoundTrips) {
  JobStatus job{"run-7", 8, {sample_node()}};
  const json text = json::parse(to_json(job).dump());
  const JobStatus back = job_status_from_json(text);
  EXPECT_EQ(to_json(back), to_json(job));
  ASSERT_EQ(back.nodes.size(), 1u);
  const RankStatus& rank = back.nodes[0].ranks[0];
  EXPECT_EQ(rank.state, RankState::failed);
  EXPECT_EQ(rank.rss_bytes, 123456789012ull);
  ASSERT_TRUE(rank.progress.has_value());
  EXPECT_EQ(rank.progress->text, "epoch 1 loss 0.5 \xc3\xa9");
  EXPECT_FALSE(back.nodes[0].ranks[1].progress.has_value());
  ASSERT_EQ(back.nodes[0].warm.size(), 2u);
  EXPECT_EQ(back.nodes[0].warm[0].pid, 5151);
  EXPECT_TRUE(back.nodes[0].warm[0].ready);
  EXPECT_FALSE(back.nodes[0].warm[1].ready);
  EXPECT_EQ(to_json(back.nodes[0])["warm"][1]["state"], "importing");
}

TEST(StatusJson, MissingFieldsReadAsDefaults) {
  const RankStatus rank = rank_status_from_json(json{{"rank", 3}});
  EXPECT_EQ(rank.rank, 3);
  EXPECT_EQ(rank.state, RankState::starting);
  EXPECT_EQ(rank.output_age_seconds, -1);
  EXPECT_FALSE(rank.progress.has_value());
  EXPECT_TRUE(job_status_from_json(json::object()).nodes.empty());
}

TEST(StatusJson, WrongTypesThrow) {
  EXPECT_THROW(rank_status_from_json(json{{"rank", "three"}}), json::exception);
  EXPECT_THROW(node_status_from_json(json{{"ranks", 5}}), json::exception);
  EXPECT_THROW(node_status_from_json(json{{"ranks", {5}}}), json::exception);
  EXPECT_THROW(job_status_from_json(json::array()), json::exception);
}

TEST(StatusJson, StacksRoundTrip) {
  RankStacks stacks{1, 0, 99, "", "/logs/stacks/rank_1.txt",
                    {{"MainThread", true, {{"sleep", "train.py:41"}, {"<module>", "train.py:50"}}}}};
  EXPECT_EQ(to_json(rank_stacks_from_json(to_json(stacks))), to_json(stacks));
}

TEST(StatusJson, RankStateNamesAreOneToOne) {
  for (RankState state : {RankState::starting, RankState::running, RankState::exited, RankState::failed,
                          RankState::stopped}) {
    EXPECT_EQ(parse_rank_state(rank_state_name(state)), state);
  }
  EXPECT_FALSE(parse_rank_state("sleeping").has_value());
}

TEST(JobEventJson, FixedFieldsAndDetailSitSideBySide) {
  JobEvent event{1700000000.5, JobEventKind::worker_exited, 0, 3, 777, {{"exitcode", 1}, {"rank", 99}}};
  const json object = to_json(event);
  EXPECT_EQ(object["event"], "worker_exited");
  EXPECT_EQ(object["rank"], 3) << "a detail member never replaces a fixed one";
  EXPECT_EQ(object["exitcode"], 1);
  const JobEvent back = job_event_from_json(json::parse(object.dump()));
  EXPECT_EQ(back.kind, JobEventKind::worker_exited);
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.pid, 777);
  EXPECT_EQ(back.detail, (json{{"exitcode", 1}}));
}

TEST(JobEventJson, AbsentRankAndNodeAreLeftOut) {
  const json object = to_json(JobEvent{1.0, JobEventKind::restart, -1, -1, 0, {{"rank", 5}}});
  EXPECT_FALSE(object.contains("rank"));
  EXPECT_FALSE(object.contains("node_rank"));
  EXPECT_EQ(job_event_from_json(object).rank, -1);
}

TEST(JobEventJson, UnknownEventIsAnError) {
  EXPECT_THROW(job_event_from_json(json{{"event", "party"}, {"time", 1.0}}), std::invalid_argument);
  EXPECT_THROW(job_event_from_json(json{{"time", 1.0}}), json::exception);
}

}  // namespace
}  // namespace ddprun::launcher

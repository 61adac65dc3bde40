// The status and event schemas: every field survives a round trip, missing fields read as their
// defaults (an older agent's JSON), and a bad shape is an error, not a silent zero. A GPU's unknown
// values are null and read back unknown (never 0); a peer's GPUs are held to the reader's bounds.
#include <gtest/gtest.h>

#include "launcher/observe/job_event.hpp"
#include "launcher/observe/status_json.hpp"
#include "rank_gpu_sample.hpp"

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
  rank.gpu_straggler = true;
  RankGpu busy = testing::busy_gpu();
  busy.xid_count = 9;
  busy.xids = {13, 31, 43, 45, 48, 63, 74, 79};
  RankGpu lost;  // every optional unknown: a GeForce board, or a GPU fallen off the bus
  lost.index = 0;
  lost.problem = "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)";
  rank.gpus = {busy, lost};
  NodeStatus node;
  node.node_rank = 2;
  node.host = "h2";
  node.attempt = 3;
  node.restarts = 1;
  node.hangs = 4;
  node.sampled_at = 1700000000.125;
  node.ranks = {rank, RankStatus{}};
  node.warm = {WarmInterpreter{0, 5151, true}, WarmInterpreter{1, 5152, false}};
  node.gpu_note = "NVML stalled: nvmlDeviceGetUtilizationRates has not returned for 2.0 s";
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
  EXPECT_EQ(back.nodes[0].gpu_note, sample_node().gpu_note);
}

TEST(StatusJson, GpusRoundTripWithTheirUnknowns) {
  const NodeStatus node = sample_node();
  const json text = json::parse(to_json(node).dump());
  const json& gpus = text["ranks"][0]["gpus"];
  ASSERT_EQ(gpus.size(), 2u);
  // Unknown is null, never 0; known zeros stay 0.
  for (const char* key : {"utilisation_percent", "memory_used_bytes", "memory_total_bytes", "own_memory_bytes",
                          "temperature_c", "power_watts", "uncorrectable_ecc_errors"}) {
    EXPECT_TRUE(gpus[1][key].is_null()) << key;
    EXPECT_FALSE(gpus[0][key].is_null()) << key;
  }
  EXPECT_EQ(gpus[0]["uncorrectable_ecc_errors"], 0);
  EXPECT_EQ(text["ranks"][0]["gpu_straggler"], true);
  EXPECT_EQ(text["gpu_note"], node.gpu_note);

  const NodeStatus back = node_status_from_json(text);
  ASSERT_EQ(back.ranks[0].gpus.size(), 2u);
  EXPECT_TRUE(back.ranks[0].gpu_straggler);
  EXPECT_FALSE(back.ranks[1].gpu_straggler);
  EXPECT_TRUE(back.ranks[1].gpus.empty());
  const RankGpu& busy = back.ranks[0].gpus[0];
  EXPECT_EQ(busy.index, 3u);
  EXPECT_EQ(busy.uuid, "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6");
  EXPECT_EQ(busy.bus_id, "00000000:3B:00.0");
  EXPECT_EQ(busy.utilisation_percent, 97u);
  EXPECT_EQ(busy.memory_used_bytes, 65'498'251'264ull);
  EXPECT_EQ(busy.memory_total_bytes, 85'899'345'920ull);
  EXPECT_EQ(busy.own_memory_bytes, 64'424'509'440ull);
  EXPECT_EQ(busy.temperature_c, 71u);
  EXPECT_EQ(busy.power_watts, 612.5);
  EXPECT_EQ(busy.throttle, (std::vector<std::string>{"SwPowerCap", "HwSlowdown"}));
  EXPECT_EQ(busy.uncorrectable_ecc_errors, 0u);
  EXPECT_EQ(busy.xid_count, 9u);
  EXPECT_EQ(busy.xids, (std::vector<unsigned long long>{13, 31, 43, 45, 48, 63, 74, 79}));
  EXPECT_EQ(busy.problem, "");
  const RankGpu& lost = back.ranks[0].gpus[1];
  EXPECT_FALSE(lost.utilisation_percent.has_value());
  EXPECT_FALSE(lost.memory_used_bytes.has_value());
  EXPECT_FALSE(lost.memory_total_bytes.has_value());
  EXPECT_FALSE(lost.own_memory_bytes.has_value());
  EXPECT_FALSE(lost.temperature_c.has_value());
  EXPECT_FALSE(lost.power_watts.has_value());
  EXPECT_FALSE(lost.uncorrectable_ecc_errors.has_value());
  EXPECT_EQ(lost.problem, "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)");
  EXPECT_EQ(to_json(back), to_json(node));
}

TEST(StatusJson, AnOlderAgentsRankHasNoGpus) {
  // Written before issue 27: no "gpus", "gpu_straggler" or "gpu_note".
  const NodeStatus node = node_status_from_json(json::parse(
      R"({"node_rank":1,"host":"old","ranks":[{"rank":4,"state":"running","straggler":true}],"warm":[]})"));
  ASSERT_EQ(node.ranks.size(), 1u);
  EXPECT_TRUE(node.ranks[0].gpus.empty());
  EXPECT_FALSE(node.ranks[0].gpu_straggler);
  EXPECT_EQ(node.gpu_note, "");
  // A GPU written with only its index: every value unknown, no flag.
  const RankStatus rank = rank_status_from_json(json{{"gpus", {{{"index", 2}}}}});
  ASSERT_EQ(rank.gpus.size(), 1u);
  EXPECT_EQ(rank.gpus[0].index, 2u);
  EXPECT_FALSE(rank.gpus[0].utilisation_percent.has_value());
  EXPECT_FALSE(rank.gpus[0].memory_total_bytes.has_value());
  EXPECT_EQ(rank.gpus[0].xid_count, 0u);
  EXPECT_TRUE(rank.gpus[0].throttle.empty());
}

TEST(StatusJson, APeersGpusAreHeldToTheBounds) {
  json gpu = {{"index", 1},
              {"uuid", std::string(1000, 'u')},
              {"bus_id", std::string(1000, 'b')},
              {"throttle", json::array()},
              {"xids", json::array()},
              {"problem", std::string(5000, 'p')}};
  for (int i = 0; i < 100; ++i) gpu["throttle"].push_back("reason" + std::to_string(i));
  for (unsigned long long xid = 1; xid <= 100; ++xid) gpu["xids"].push_back(xid);
  json rank = {{"rank", 0}, {"gpus", json::array()}};
  for (int i = 0; i < 100; ++i) rank["gpus"].push_back(gpu);
  json node = {{"ranks", {rank}}, {"gpu_note", std::string(5000, 'n')}};

  const NodeStatus back = node_status_from_json(node);
  ASSERT_EQ(back.ranks.size(), 1u);
  EXPECT_EQ(back.ranks[0].gpus.size(), kStatusGpusPerRank) << "the first GPUs kept";
  EXPECT_EQ(back.gpu_note.size(), kStatusGpuTextBytes);
  const RankGpu& first = back.ranks[0].gpus[0];
  EXPECT_EQ(first.uuid.size(), kStatusGpuNameBytes);
  EXPECT_EQ(first.bus_id.size(), kStatusGpuNameBytes);
  EXPECT_EQ(first.problem.size(), kStatusGpuTextBytes);
  ASSERT_EQ(first.throttle.size(), kStatusThrottleNames);
  EXPECT_EQ(first.throttle[0], "reason0") << "the first names kept";
  ASSERT_EQ(first.xids.size(), kStatusXidsPerGpu);
  EXPECT_EQ(first.xids.front(), 100 - kStatusXidsPerGpu + 1) << "the newest Xids kept, oldest first";
  EXPECT_EQ(first.xids.back(), 100u);
}

TEST(StatusJson, AGpuTextIsCutOnACharacterBoundary) {
  // "é" is two bytes: a cut that lands inside it drops the whole character.
  std::string problem(kStatusGpuTextBytes - 1, 'x');
  problem += "\xc3\xa9";
  const RankStatus rank = rank_status_from_json(json{{"gpus", {{{"problem", problem}}}}});
  EXPECT_EQ(rank.gpus[0].problem, std::string(kStatusGpuTextBytes - 1, 'x'));
}

TEST(StatusJson, AGpuOfTheWrongShapeIsAnError) {
  EXPECT_THROW(rank_status_from_json(json{{"gpus", 5}}), json::exception);
  EXPECT_THROW(rank_status_from_json(json{{"gpus", {5}}}), json::exception);
  EXPECT_THROW(rank_status_from_json(json{{"gpus", {{{"utilisation_percent", "high"}}}}}), json::exception);
  EXPECT_THROW(rank_status_from_json(json{{"gpus", {{{"xids", "79"}}}}}), json::exception);
  EXPECT_THROW(rank_status_from_json(json{{"gpus", {{{"throttle", {1}}}}}}), json::exception);
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

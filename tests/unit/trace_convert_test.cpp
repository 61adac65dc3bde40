// The event log -> Chrome trace converter, by table: what lines are events, and the trace a
// scripted job gives (slices per rank, rounds and the job on the agent track, instants, one
// process per node, node events recorded by several agents once).
#include "launcher/observe/trace_convert.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ddprun::launcher {
namespace {

using nlohmann::json;

JobEvent ev(double time, JobEventKind kind, int node_rank, int rank = -1, pid_t pid = 0, json detail = json::object()) {
  JobEvent e;
  e.time = time;
  e.kind = kind;
  e.node_rank = node_rank;
  e.rank = rank;
  e.pid = pid;
  e.detail = std::move(detail);
  return e;
}

/// The trace's events of phase `ph` (metadata left out unless asked).
std::vector<json> phase(const json& trace, const std::string& ph) {
  std::vector<json> found;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == ph) found.push_back(e);
  }
  return found;
}

const json* named(const std::vector<json>& events, const std::string& name, int pid = -1) {
  for (const json& e : events) {
    if (e.at("name") == name && (pid < 0 || e.at("pid") == pid)) return &e;
  }
  return nullptr;
}

/// The name a metadata record gives the process `pid` / thread `tid` ("" when none).
std::string meta_name(const json& trace, const std::string& what, int pid, int tid = 0) {
  for (const json& e : phase(trace, "M")) {
    if (e.at("name") == what && e.at("pid") == pid && (what == "process_name" || e.at("tid") == tid)) {
      return e.at("args").at("name");
    }
  }
  return "";
}

TEST(TraceConvert, LinesThatAreNotEventsAreReportedWithTheirNumbers) {
  const std::string text =
      "{\"time\":1.5,\"event\":\"job_started\",\"node_rank\":0}\n"
      "\n"
      "not json\n"
      "{\"time\":2,\"event\":\"teleported\"}\n"
      "{\"event\":\"restart\"}\n"
      "[1,2]\n"
      "{\"time\":\"soon\",\"event\":\"restart\"}\n"
      "{\"time\":3,\"event\":\"worker_started\",\"rank\":1,\"pid\":7}\r\n"
      "{\"time\":4,\"event\":\"job_fin";  // a torn last line: the log still being written
  EventLines lines = read_event_lines(text);
  ASSERT_EQ(lines.events.size(), 2u);
  EXPECT_EQ(lines.events[0].kind, JobEventKind::job_started);
  EXPECT_EQ(lines.events[1].pid, 7);
  struct Case {
    std::size_t line;
    std::string why;
  };
  const std::vector<Case> expected = {
      {3, "not JSON"},
      {4, "unknown event \"teleported\""},
      {5, "key 'time' not found"},
      {6, "not a JSON object"},
      {7, "type must be number, but is string"},
      {9, "not JSON"},
  };
  ASSERT_EQ(lines.bad.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(lines.bad[i].line, expected[i].line) << i;
    EXPECT_EQ(lines.bad[i].why, expected[i].why) << i;
  }
}

/// A single node: two ranks, rank 1 fails, a restart, both succeed.
std::vector<JobEvent> restarted_job() {
  const json agent = {{"host", "h"}, {"agent_pid", 99}};
  json started = agent;
  started["command"] = {"train.py"};
  return {
      ev(100.0, JobEventKind::job_started, 0, -1, 0, started),
      ev(100.1, JobEventKind::worker_started, 0, 0, 10, {{"attempt", 0}, {"local_rank", 0}}),
      ev(100.2, JobEventKind::worker_started, 0, 1, 11, {{"attempt", 0}, {"local_rank", 1}}),
      ev(101.0, JobEventKind::worker_exited, 0, 1, 11,
         {{"exitcode", 3}, {"description", "exit code 3"}, {"failed", true}}),
      ev(101.5, JobEventKind::worker_exited, 0, 0, 10,
         {{"exitcode", -15}, {"description", "killed by SIGTERM"}, {"failed", false}}),
      ev(101.5, JobEventKind::restart, 0, -1, 0, {{"restart_count", 1}, {"reason", "rank 1 failed (exit code 3)"}}),
      ev(101.6, JobEventKind::worker_started, 0, 0, 12, {{"attempt", 1}}),
      ev(101.7, JobEventKind::worker_started, 0, 1, 13, {{"attempt", 1}}),
      ev(102.0, JobEventKind::straggler, 0, 1, 13, {{"rate", 1.0}, {"median", 4.0}}),
      ev(103.0, JobEventKind::worker_exited, 0, 0, 12, {{"exitcode", 0}, {"failed", false}}),
      ev(103.0, JobEventKind::worker_exited, 0, 1, 13, {{"exitcode", 0}, {"failed", false}}),
      ev(103.1, JobEventKind::job_finished, 0, -1, 0, {{"exit_status", 0}, {"host", "h"}, {"agent_pid", 99}}),
  };
}

TEST(TraceConvert, EachWorkersLifeIsASliceOnItsRanksTrackWithItsExit) {
  std::vector<JobEvent> events = restarted_job();
  std::reverse(events.begin(), events.end());  // any order in: sorted by time
  const json trace = chrome_trace(events);
  EXPECT_EQ(trace.at("otherData").at("origin_unix_time"), 100.0);
  const std::vector<json> slices = phase(trace, "X");
  struct Case {
    std::string name;
    int tid;
    double ts, dur;
    int exitcode;
    std::string cname;
  };
  const Case cases[] = {
      {"rank 0 attempt 0", 1, 100000, 1400000, -15, "grey"},
      {"rank 1 attempt 0", 2, 200000, 800000, 3, "terrible"},
      {"rank 0 attempt 1", 1, 1600000, 1400000, 0, "good"},
      {"rank 1 attempt 1", 2, 1700000, 1300000, 0, "good"},
  };
  for (const auto& c : cases) {
    const json* slice = named(slices, c.name);
    ASSERT_NE(slice, nullptr) << c.name;
    EXPECT_EQ(slice->at("pid"), 1) << c.name << ": node 0 is process 1";
    EXPECT_EQ(slice->at("tid"), c.tid) << c.name;
    EXPECT_DOUBLE_EQ(slice->at("ts").get<double>(), c.ts) << c.name;
    EXPECT_DOUBLE_EQ(slice->at("dur").get<double>(), c.dur) << c.name;
    EXPECT_EQ(slice->at("args").at("exitcode"), c.exitcode) << c.name;
    EXPECT_EQ(slice->at("cname"), c.cname) << c.name;
  }
  const json* job = named(slices, "job");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->at("tid"), 0);
  EXPECT_DOUBLE_EQ(job->at("dur").get<double>(), 3100000);
  EXPECT_EQ(job->at("args").at("exit_status"), 0);
  EXPECT_EQ(job->at("args").at("command"), json({"train.py"}));
  EXPECT_EQ(slices.size(), 5u);

  const std::vector<json> instants = phase(trace, "i");
  ASSERT_EQ(instants.size(), 2u);
  EXPECT_EQ(instants[0].at("name"), "restart 1");
  EXPECT_EQ(instants[0].at("tid"), 0);
  EXPECT_EQ(instants[0].at("s"), "p");
  EXPECT_EQ(instants[0].at("args").at("reason"), "rank 1 failed (exit code 3)");
  EXPECT_EQ(instants[1].at("name"), "straggler");
  EXPECT_EQ(instants[1].at("tid"), 2);
  EXPECT_EQ(instants[1].at("s"), "t");

  EXPECT_EQ(meta_name(trace, "process_name", 1), "node 0 (h)");
  EXPECT_EQ(meta_name(trace, "thread_name", 1, 0), "agent");
  EXPECT_EQ(meta_name(trace, "thread_name", 1, 1), "rank 0");
  EXPECT_EQ(meta_name(trace, "thread_name", 1, 2), "rank 1");
}

TEST(TraceConvert, WhatIsOpenWhenTheLogEndsLastsToItsLastEvent) {
  std::vector<JobEvent> events = restarted_job();
  events.resize(8);  // the log ends while attempt 1 runs (a job still going, or killed)
  const json trace = chrome_trace(events);
  const std::vector<json> slices = phase(trace, "X");
  const json* running = named(slices, "rank 0 attempt 1");
  ASSERT_NE(running, nullptr);
  EXPECT_DOUBLE_EQ(running->at("dur").get<double>(), 100000);  // 101.6 to 101.7
  EXPECT_FALSE(running->contains("cname"));
  EXPECT_EQ(running->at("args").at("exit"), "none in the log: running at its end");
  const json* job = named(slices, "job");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->at("args").at("exit_status"), "unknown: the log ends while the job runs");
}

TEST(TraceConvert, NodesAreProcessesRoundsAreSlicesAndNodeEventsAppearOnce) {
  const json a = {{"host", "ha"}, {"agent_pid", 1}};
  const json b = {{"host", "hb"}, {"agent_pid", 2}};
  auto round = [](int number, int nodes) { return json{{"round", number}, {"nodes", nodes}, {"world_size", nodes}}; };
  auto node = [](const std::string& id, const std::string& host, int number) {
    return json{{"node", id}, {"host", host}, {"round", number}};
  };
  json lost = {{"node", "b-id"}, {"host", "hb"}, {"how", "left"}, {"reason", "node hb left (SIGTERM)"}};
  // Two dynamic agents sharing one file: node rank unknown (-1) when they start.
  std::vector<JobEvent> events = {
      ev(10.0, JobEventKind::job_started, -1, -1, 0, a),
      ev(10.1, JobEventKind::job_started, -1, -1, 0, b),
      ev(11.0, JobEventKind::round_formed, 0, -1, 0, round(0, 2)),
      ev(11.0, JobEventKind::node_joined, 0, -1, 0, node("a-id", "ha", 0)),
      ev(11.0, JobEventKind::node_joined, 1, -1, 0, node("b-id", "hb", 0)),
      ev(11.1, JobEventKind::round_formed, 1, -1, 0, round(0, 2)),
      ev(11.1, JobEventKind::node_joined, 0, -1, 0, node("a-id", "ha", 0)),  // b saw the same
      ev(11.1, JobEventKind::node_joined, 1, -1, 0, node("b-id", "hb", 0)),
      ev(11.2, JobEventKind::worker_started, 0, 0, 20),
      ev(11.3, JobEventKind::worker_started, 1, 1, 20),  // the same pid on another node
      ev(12.0, JobEventKind::worker_exited, 1, 1, 20, {{"exitcode", -15}, {"failed", false}}),
      ev(12.1, JobEventKind::node_lost, 1, -1, 0, lost),
      ev(12.1, JobEventKind::job_finished, 1, -1, 0, json{{"exit_status", 143}, {"host", "hb"}, {"agent_pid", 2}}),
      ev(12.2, JobEventKind::worker_exited, 0, 0, 20, {{"exitcode", -15}, {"failed", false}}),
      ev(12.3, JobEventKind::round_formed, 0, -1, 0, round(1, 1)),
      ev(12.3, JobEventKind::hang_detected, 0, -1, 0, {{"idle_seconds", 30}}),
      ev(13.0, JobEventKind::job_finished, 0, -1, 0, json{{"exit_status", 143}, {"host", "ha"}, {"agent_pid", 1}}),
  };
  const json trace = chrome_trace(events);
  EXPECT_EQ(meta_name(trace, "process_name", 1), "node 0 (ha)");
  EXPECT_EQ(meta_name(trace, "process_name", 2), "node 1 (hb)");
  EXPECT_EQ(meta_name(trace, "process_name", 0), "") << "no event is about no node";

  const std::vector<json> slices = phase(trace, "X");
  struct Case {
    std::string name;
    int pid;
    double ts, dur;
  };
  const Case cases[] = {
      {"rank 0", 1, 1200000, 1000000},  {"rank 1", 2, 1300000, 700000},
      {"round 0", 1, 1000000, 1300000}, {"round 0", 2, 1100000, 1000000},
      {"round 1", 1, 2300000, 700000},  {"job", 1, 0, 3000000},
      {"job", 2, 100000, 2000000},
  };
  for (const auto& c : cases) {
    const json* slice = named(slices, c.name, c.pid);
    ASSERT_NE(slice, nullptr) << c.name << " in " << c.pid;
    EXPECT_DOUBLE_EQ(slice->at("ts").get<double>(), c.ts) << c.name << " in " << c.pid;
    EXPECT_DOUBLE_EQ(slice->at("dur").get<double>(), c.dur) << c.name << " in " << c.pid;
  }
  EXPECT_EQ(slices.size(), 7u);

  std::vector<std::string> instants;
  for (const json& e : phase(trace, "i")) instants.push_back(e.at("name").get<std::string>() + "@" + e.at("pid").dump());
  EXPECT_EQ(instants, (std::vector<std::string>{"node joined@1", "node joined@2", "node lost@2", "hang detected@1"}));
  EXPECT_EQ(phase(trace, "i")[3].at("s"), "g");
}

TEST(TraceConvert, EveryRecordHasWhatTheTraceEventFormatRequires) {
  const json trace = chrome_trace(restarted_job());
  for (const json& e : trace.at("traceEvents")) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name")) << e.dump();
    ASSERT_TRUE(e.at("pid").is_number_integer() && e.at("tid").is_number_integer()) << e.dump();
    const std::string ph = e.at("ph");
    if (ph == "M") {
      EXPECT_TRUE(e.at("args").is_object()) << e.dump();
      continue;
    }
    ASSERT_TRUE(e.at("ts").is_number()) << e.dump();
    EXPECT_GE(e.at("ts").get<double>(), 0) << e.dump();
    if (ph == "X") EXPECT_GE(e.at("dur").get<double>(), 0) << e.dump();
    if (ph == "i") EXPECT_TRUE(e.at("s") == "t" || e.at("s") == "p" || e.at("s") == "g") << e.dump();
    EXPECT_TRUE(ph == "X" || ph == "i") << e.dump();
  }
  EXPECT_EQ(chrome_trace({}).at("traceEvents"), json::array());
}

}  // namespace
}  // namespace ddprun::launcher

// `ddprun trace`: a real job's event log (--events) becomes a Chrome trace with a slice per
// worker life, the restart between the attempts and the job on the agent's track; bad lines
// are named by number and the rest converted; usage and unreadable input fail as documented.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "harness.hpp"

using namespace ddprun::testing;
using nlohmann::json;

namespace {

std::set<std::string> names_of_phase(const json& trace, const std::string& ph) {
  std::set<std::string> names;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == ph) names.insert(e.at("name").get<std::string>());
  }
  return names;
}

}  // namespace

TEST(Trace, ARealJobsEventLogBecomesATimelineOfItsWorkersAndItsRestart) {
  TempDir dir;
  const auto events = dir.path() / "events.jsonl";
  const auto trace_path = dir.path() / "trace.json";
  Outcome job = run_ddprun({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--events", events.string(),
                            test_worker_binary(), "restart", dir.str(), "1"});
  ASSERT_EQ(job.exit_status, 0) << job.err;
  Outcome converted = run_ddprun({"trace", events.string(), "-o", trace_path.string()});
  ASSERT_EQ(converted.exit_status, 0) << converted.err;
  EXPECT_EQ(converted.out, "");
  EXPECT_EQ(converted.err, "");
  const json trace = json::parse(read_file(trace_path));
  EXPECT_EQ(names_of_phase(trace, "X"), (std::set<std::string>{"job", "rank 0 attempt 0", "rank 1 attempt 0",
                                                               "rank 0 attempt 1", "rank 1 attempt 1"}));
  EXPECT_EQ(names_of_phase(trace, "i"), (std::set<std::string>{"restart 1"}));
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("name") != "rank 1 attempt 0") continue;
    EXPECT_EQ(e.at("args").at("exitcode"), 1);
    EXPECT_EQ(e.at("cname"), "terrible");
    EXPECT_EQ(e.at("tid"), 2);
  }
  // Without -o: the same trace on stdout.
  Outcome to_stdout = run_ddprun({"trace", events.string()});
  ASSERT_EQ(to_stdout.exit_status, 0) << to_stdout.err;
  EXPECT_EQ(json::parse(to_stdout.out), trace);
}

TEST(Trace, BadLinesAreNamedByNumberAndTheRestIsConverted) {
  TempDir dir;
  const auto events = dir.path() / "events.jsonl";
  std::ofstream(events) << "{\"time\":1,\"event\":\"worker_started\",\"node_rank\":0,\"rank\":0,\"pid\":5}\n"
                           "garbage\n"
                           "{\"time\":2,\"event\":\"worker_exited\",\"node_rank\":0,\"rank\":0,\"pid\":5,\"exitcode\":0}\n"
                           "{\"time\":3,\"event\":\"job_fin";
  Outcome converted = run_ddprun({"trace", events.string()});
  EXPECT_EQ(converted.exit_status, 0);
  EXPECT_EQ(converted.err, "ddprun trace: " + events.string() + ":2: not JSON\nddprun trace: " + events.string() +
                               ":4: not JSON\n");
  EXPECT_EQ(names_of_phase(json::parse(converted.out), "X"), (std::set<std::string>{"rank 0"}));
}

// A line of valid JSON nested 100,000 deep (200 KB) once overflowed the stack in nlohmann's
// recursive copy (SIGSEGV): it is a bad line like any other, reported and left out.
TEST(Trace, ALineNestedTooDeepIsReportedAndLeftOut) {
  TempDir dir;
  const auto events = dir.path() / "events.jsonl";
  constexpr std::size_t kDepth = 100000;
  std::ofstream(events) << "{\"time\":1,\"event\":\"worker_started\",\"node_rank\":0,\"rank\":0,\"pid\":5}\n"
                        << "{\"time\":1.5,\"event\":\"restart\",\"x\":" << std::string(kDepth, '[')
                        << std::string(kDepth, ']') << "}\n"
                        << "{\"time\":2,\"event\":\"worker_exited\",\"node_rank\":0,\"rank\":0,\"pid\":5,"
                           "\"exitcode\":0}\n";
  Outcome converted = run_ddprun({"trace", events.string()});
  ASSERT_EQ(converted.exit_status, 0) << converted.err;
  EXPECT_EQ(converted.err, "ddprun trace: " + events.string() + ":2: nested deeper than 64 levels\n");
  EXPECT_EQ(names_of_phase(json::parse(converted.out), "X"), (std::set<std::string>{"rank 0"}));
  EXPECT_EQ(names_of_phase(json::parse(converted.out), "i"), (std::set<std::string>{}));
}

TEST(Trace, NoEventsNoInputOrAnUnreadableFileFail) {
  TempDir dir;
  const auto empty = dir.path() / "empty.jsonl";
  std::ofstream(empty) << "not an event log\n";
  Outcome nothing = run_ddprun({"trace", empty.string()});
  EXPECT_EQ(nothing.exit_status, 1);
  EXPECT_NE(nothing.err.find("no events in " + empty.string()), std::string::npos) << nothing.err;

  Outcome no_input = run_ddprun({"trace"});
  EXPECT_EQ(no_input.exit_status, 2);
  EXPECT_NE(no_input.err.find("usage: ddprun trace EVENTS.jsonl"), std::string::npos) << no_input.err;

  Outcome missing = run_ddprun({"trace", (dir.path() / "missing.jsonl").string()});
  EXPECT_EQ(missing.exit_status, 1);
  EXPECT_EQ(missing.err, "ddprun: trace: cannot read " + (dir.path() / "missing.jsonl").string() +
                             ": No such file or directory\n");
}

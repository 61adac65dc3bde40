// Nodes started wrongly, as several ddprun agents on 127.0.0.1: flags that disagree with the job's
// (--nnodes, --max-restarts) and a --node-rank given twice. Every node is told who said what,
// whichever came first, and a job that can go on without the wrong node does.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <thread>

#include "../support/free_port.hpp"
#include "harness.hpp"
#include "multinode_support.hpp"
#include "rendezvous/round_keys.hpp"
#include "rendezvous/store_client.hpp"

using namespace ddprun::testing;
using namespace std::chrono_literals;

namespace {

/// Bounds that only prove "no hang".
constexpr auto kBound = std::chrono::seconds(90);
const std::string kConf = "timeout=30,read_timeout=15,keep_alive_interval=0.3";

/// Returns once `count` nodes have taken a join slot in round 0 of the static job on `port`: read
/// from the job's store itself, so that a test can start the next node only then.
void wait_for_joins(int port, int count) {
  ddprun::rendezvous::StoreClientOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.connect_timeout = 30s;
  options.timeout = 60s;
  ddprun::rendezvous::StoreClient store(options);
  store.wait({ddprun::rendezvous::RoundKeys("none").join_slot(0, count - 1)});
}

void expect_failed_with(const Outcome& outcome, const std::vector<std::string>& parts, const std::string& name) {
  EXPECT_EQ(outcome.exit_status, 1) << name << ":\n" << outcome.err;
  for (const auto& part : parts) EXPECT_NE(outcome.err.find(part), std::string::npos) << name << ":\n" << outcome.err;
  EXPECT_EQ(outcome.err.find("lost the rendezvous store"), std::string::npos) << name << ":\n" << outcome.err;
  EXPECT_EQ(first_unprefixed_line(outcome.err), "") << outcome.err;
}

}  // namespace

TEST(Conflicts, StaticNnodesMismatchTellsEveryNodeWhoSaidWhatWhoeverStartsFirst) {
  const std::vector<std::string> told = {"node rank 1 on ", " says --nnodes=3, but this job was started with --nnodes=2 by node rank 0 on "};
  for (bool disagreeing_first : {false, true}) {
    SCOPED_TRACE(disagreeing_first ? "the disagreeing node starts first" : "node 0 starts first");
    const int port = free_port();
    std::unique_ptr<Launch> node0, node1;
    auto start0 = [&] { node0 = std::make_unique<Launch>(concat(static_flags(2, 0, port, kConf), {"/bin/true"})); };
    auto start1 = [&] { node1 = std::make_unique<Launch>(concat(static_flags(3, 1, port, kConf), {"/bin/true"})); };
    if (disagreeing_first) {
      start1();  // it waits for node 0's store to come up
      std::this_thread::sleep_for(500ms);
      start0();
    } else {
      start0();
      wait_for_joins(port, 1);  // node 0 waits in the round for a node 1
      start1();
    }
    expect_failed_with(node0->wait(kBound), told, "node 0");
    expect_failed_with(node1->wait(kBound), told, "node 1");
  }
}

TEST(Conflicts, MaxRestartsMismatchTellsEveryNodeWhoSaidWhat) {
  const int port = free_port();
  Launch node0(concat(static_flags(3, 0, port, kConf), {"--max_restarts=0", "/bin/true"}));
  Launch node2(concat(static_flags(3, 2, port, kConf), {"--max_restarts=0", "/bin/true"}));
  wait_for_joins(port, 2);
  Launch node1(concat(static_flags(3, 1, port, kConf), {"--max_restarts=2", "/bin/true"}));
  const std::vector<std::string> told = {
      "node rank 1 on ", " says --max-restarts=2, but this job was started with --max-restarts=0 by node rank 0 on "};
  expect_failed_with(node1.wait(kBound), told, "node 1");
  expect_failed_with(node0.wait(kBound), told, "node 0");
  expect_failed_with(node2.wait(kBound), told, "node 2");
}

TEST(Conflicts, ADuplicateNodeRankWhileTheJobRunsIsRefusedAtOnce) {
  TempDir dir;
  const std::string worker = wait_for_go_worker(dir);
  const int port = free_port();
  Launch node0(concat(static_flags(2, 0, port, kConf), {worker}));
  Launch node1(concat(static_flags(2, 1, port, kConf), {worker}));
  ASSERT_TRUE(files_appear(dir, {"started_0", "started_1"}, 60s)) << "the job did not start";
  Launch duplicate(concat(static_flags(2, 1, port, kConf), {worker}));
  Outcome refused;
  // Refused while the job runs: before, it waited for the job's end and then said "rendezvous closed".
  EXPECT_TRUE(ends_by_itself(duplicate, 30s, refused)) << refused.err;
  expect_failed_with(refused, {"node rank 1 is taken by ", "which runs in round 0 of job 'none' and is alive"},
                     "the duplicate");
  std::ofstream(dir.path() / "go").close();
  Outcome outcome0 = node0.wait(kBound);
  Outcome outcome1 = node1.wait(kBound);
  EXPECT_EQ(outcome0.exit_status, 0) << outcome0.err;
  EXPECT_EQ(outcome1.exit_status, 0) << outcome1.err;
}

TEST(Conflicts, ADuplicateNodeRankWhileTheJobFormsIsRefusedAndTheJobFormsWithoutIt) {
  const int port = free_port();
  auto sgd = concat({plain_sgd_binary()}, plain_sgd_args());
  Launch node0(concat(static_flags(3, 0, port, kConf), sgd));
  Launch node1a(concat(static_flags(3, 1, port, kConf), sgd));
  Launch node1b(concat(static_flags(3, 1, port, kConf), sgd));
  // One of the two rank-1 nodes is turned away before node 2 comes: the round is still forming.
  ASSERT_TRUE(eventually([&] { return !process_alive(node1a.pid()) || !process_alive(node1b.pid()); }, 60s))
      << "neither node of rank 1 was turned away";
  Launch node2(concat(static_flags(3, 2, port, kConf), sgd));
  Outcome outcome1a = node1a.wait(kBound);
  Outcome outcome1b = node1b.wait(kBound);
  const bool a_refused = outcome1a.exit_status != 0;
  const Outcome& refused = a_refused ? outcome1a : outcome1b;
  const Outcome& holder = a_refused ? outcome1b : outcome1a;
  expect_failed_with(refused, {"node rank 1 is taken by ", "which joined round 0 of job 'none' first"}, "the duplicate");
  std::vector<std::pair<std::string, Outcome>> job = {
      {"node 0", node0.wait(kBound)}, {"node 1", holder}, {"node 2", node2.wait(kBound)}};
  for (const auto& [name, outcome] : job) EXPECT_EQ(outcome.exit_status, 0) << all_output(job);
  EXPECT_EQ(plain_sgd_missing(job[0].second.out, 3), "") << all_output(job);
}

// A multi-node job's status and stacks from any agent (issue 13, item 5): two agents on loopback
// (a job of 2 nodes, 2 workers each) each publish their node's status on the rendezvous store's job
// board; /api/status of either agent lists all 4 ranks of both nodes (static and c10d), `ddprun
// status` against node 1's endpoint prints every rank, and `ddprun stacks` against node 1's endpoint
// gathers every node's stacks: all 4 ranks, grouped. A hang gets the whole job's digest on node 0,
// and with --hang-action stop ends the job on both agents. Stragglers are judged against the job's
// median: a node whose ranks are all slow is named, though alone it looks even.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "../support/free_port.hpp"
#include "../support/raw_http.hpp"
#include "harness.hpp"

namespace ddprun::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

/// One agent of the job; its stderr goes to a file read while it runs.
class BoardNode {
 public:
  /// `job`: the options after ddprun's own and the program (default: test_worker writing its pid).
  /// `c10d`: an elastic rendezvous (--rdzv-backend c10d, node 0 hosting the store on `master_port`)
  /// instead of a static one.
  BoardNode(const TempDir& dir, const std::string& runtime, int node_rank, int master_port,
            std::vector<std::string> job = {}, bool c10d = false)
      : stderr_file_(dir.path() / ("node" + std::to_string(node_rank) + ".err")) {
    if (job.empty()) job = {"--no-python", test_worker_binary(), "pid", dir.str()};
    std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>\"$DDPRUN_TEST_STDERR\"", ddprun_binary(),
                                     "--nnodes=2"};
    std::string conf = "--rdzv_conf=timeout=60,read_timeout=15";
    if (c10d) {
      argv.insert(argv.end(), {"--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:" + std::to_string(master_port)});
      conf += std::string(",is_host=") + (node_rank == 0 ? "1" : "0");  // one host: say which agent hosts
    } else {
      argv.insert(argv.end(), {"--node_rank=" + std::to_string(node_rank), "--master_addr=127.0.0.1",
                               "--master_port=" + std::to_string(master_port)});
    }
    argv.insert(argv.end(), {"--nproc_per_node=2", conf, "--rdzv_id=board-" + std::to_string(::getpid()),
                             "--status-port", "0", "--log-dir",
                             (dir.path() / ("logs" + std::to_string(node_rank))).string()});
    argv.insert(argv.end(), job.begin(), job.end());
    launch_ = std::make_unique<Launch>(Launch::Command{argv},
                                       std::map<std::string, std::string>{{"XDG_RUNTIME_DIR", runtime},
                                                                          {"DDPRUN_TEST_STDERR", stderr_file_.string()}});
  }
  ~BoardNode() {
    if (outcome_) return;
    launch_->send(SIGTERM);
    launch_->wait();
  }
  /// Waits for the agent to end on its own.
  const Outcome& wait(std::chrono::milliseconds timeout) {
    if (!outcome_) outcome_ = launch_->wait(timeout);
    return *outcome_;
  }
  std::string stderr_text() const { return read_file(stderr_file_); }
  /// The port of "ddprun: status at http://127.0.0.1:PORT/"; 0 when not printed (yet).
  int port() const { return printed_status_port(stderr_text()); }

 private:
  std::filesystem::path stderr_file_;
  std::unique_ptr<Launch> launch_;
  std::optional<Outcome> outcome_;
};

/// rank -> (node rank, pid) as served by the agent on `port`; empty on any error (said in `why`).
std::map<int, std::pair<int, int>> served_ranks(int port, std::string& why) {
  std::map<int, std::pair<int, int>> ranks;
  try {
    HttpReply reply = http_get(RawConnection::tcp(port), "/api/status");
    why = std::to_string(reply.status) + " " + reply.body.substr(0, 4000);
    if (reply.status != 200) return {};
    const json status = json::parse(reply.body);  // kept: a loop over a temporary's member would dangle
    for (const auto& node : status.at("nodes")) {
      for (const auto& rank : node.at("ranks")) {
        ranks[rank.at("rank").get<int>()] = {node.at("node_rank").get<int>(), rank.at("pid").get<int>()};
      }
    }
  } catch (const std::exception& error) {
    why += std::string(": ") + error.what();
    return {};
  }
  return ranks;
}

TEST(MultinodeStatus, EitherAgentServesEveryRankOfBothNodesAndTheirStacks) {
  TempDir runtime;
  ::chmod(runtime.path().c_str(), 0700);
  TempDir dir;
  const int master_port = free_port();
  BoardNode node0(dir, runtime.str(), 0, master_port);
  BoardNode node1(dir, runtime.str(), 1, master_port);
  std::map<int, int> pids;
  ASSERT_TRUE(eventually([&] {
    for (int rank = 0; rank < 4; ++rank) {
      if (!std::filesystem::exists(dir.path() / ("pid_" + std::to_string(rank)))) return false;
    }
    return true;
  }, 60s)) << node0.stderr_text() << node1.stderr_text();
  for (int rank = 0; rank < 4; ++rank) pids[rank] = std::stoi(read_file(dir.path() / ("pid_" + std::to_string(rank))));
  ASSERT_GT(node0.port(), 0) << node0.stderr_text();
  ASSERT_GT(node1.port(), 0) << node1.stderr_text();

  // Each agent: its own ranks and, from the board within a few seconds, the other node's.
  for (int port : {node0.port(), node1.port()}) {
    std::map<int, std::pair<int, int>> ranks;
    std::string why;
    EXPECT_TRUE(eventually([&] {
      ranks = served_ranks(port, why);
      return ranks.size() == 4 && ranks[0].second == pids[0] && ranks[3].second == pids[3];
    })) << "port " << port << ": " << ranks.size() << " ranks: " << why << "\n" << node0.stderr_text() << node1.stderr_text();
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_EQ(ranks[rank].first, rank / 2) << "rank " << rank << " is on node " << rank / 2;
      EXPECT_EQ(ranks[rank].second, pids[rank]) << "rank " << rank;
    }
  }

  const std::string endpoint1 = "127.0.0.1:" + std::to_string(node1.port());
  const std::map<std::string, std::string> env = {{"XDG_RUNTIME_DIR", runtime.str()}};
  Outcome status = run_ddprun({"status", endpoint1}, env);
  ASSERT_EQ(status.exit_status, 0) << status.err;
  for (int rank = 0; rank < 4; ++rank) {
    std::regex row("\\n +" + std::to_string(rank) + " +" + std::to_string(rank / 2) + " +" + std::to_string(rank % 2) +
                   " +" + std::to_string(pids[rank]) + " +running ");
    EXPECT_TRUE(std::regex_search(status.out, row)) << "rank " << rank << " in\n" << status.out;
  }

  // Asked of node 1, which does not host the store: every node captures its own ranks.
  Outcome stacks = run_ddprun({"stacks", endpoint1}, env);
  ASSERT_EQ(stacks.exit_status, 0) << stacks.err << stacks.out;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(stacks.out.find("rank " + std::to_string(rank) + " (pid " + std::to_string(pids[rank]) + ", node " +
                              std::to_string(rank / 2) + ")"),
              std::string::npos)
        << stacks.out;
  }
  EXPECT_EQ(stacks.out.rfind("ranks 0-3: ", 0), 0u) << "the digest first: every rank waits in the same place\n"
                                                         << stacks.out;
  EXPECT_NE(stacks.out.find("pause"), std::string::npos) << stacks.out;
  for (const auto& [rank, pid] : pids) EXPECT_TRUE(process_alive(pid)) << "a capture leaves rank " << rank << " running";
}

// A hang across two agents: plain_sgd's rank 1 (on node 0) stalls before its first all-reduce, so
// the other three wait inside it. Each agent finds the hang with its own ranks; node 0 also asks
// node 1 for its stacks through the board and prints the whole job's digest, the odd rank first.
TEST(MultinodeStatus, AHangOnTwoAgentsGetsTheWholeJobsDigestOnNodeZero) {
  TempDir runtime;
  ::chmod(runtime.path().c_str(), 0700);
  TempDir dir;
  const int master_port = free_port();
  const std::vector<std::string> job = {"--hang-timeout", "3", PLAIN_SGD_BINARY, "--stall-rank", "1"};
  BoardNode node0(dir, runtime.str(), 0, master_port, job);
  BoardNode node1(dir, runtime.str(), 1, master_port, job);
  ASSERT_TRUE(eventually([&] { return node0.stderr_text().find("hang: the whole job (2 nodes):") != std::string::npos; },
                         120s))
      << node0.stderr_text() << node1.stderr_text();
  // The digest's lines follow its heading; give them a moment to be written out.
  ASSERT_TRUE(eventually([&] {
    return node0.stderr_text().find("hang:   ranks 0,2,3: ") != std::string::npos;
  }, 10s)) << node0.stderr_text();
  const std::string err0 = node0.stderr_text();
  const std::string whole = err0.substr(err0.find("hang: the whole job (2 nodes):"));
  EXPECT_NE(whole.find("hang:   rank 1: stall <- train <- main\n"), std::string::npos) << whole;
  EXPECT_NE(whole.find("hang:   ranks 0,2,3: ddprun::detail::GlooWork::wait <- train <- main\n"), std::string::npos)
      << whole;
  EXPECT_LT(whole.find("hang:   rank 1:"), whole.find("hang:   ranks 0,2,3:")) << "the odd rank out first\n" << whole;
  // Node 1 found the hang too, with its own ranks only, and printed no whole-job digest.
  const std::string err1 = node1.stderr_text();
  EXPECT_NE(err1.find("hang: ranks 2,3: ddprun::detail::GlooWork::wait <- train <- main\n"), std::string::npos) << err1;
  EXPECT_EQ(err1.find("the whole job"), std::string::npos) << err1;
}

TEST(MultinodeStatus, AC10dJobsBoardServesEveryRankOfBothNodes) {
  TempDir runtime;
  ::chmod(runtime.path().c_str(), 0700);
  TempDir dir;
  const int port = free_port();
  BoardNode node0(dir, runtime.str(), 0, port, {}, /*c10d=*/true);
  BoardNode node1(dir, runtime.str(), 1, port, {}, /*c10d=*/true);
  ASSERT_TRUE(eventually([&] {
    for (int rank = 0; rank < 4; ++rank) {
      if (!std::filesystem::exists(dir.path() / ("pid_" + std::to_string(rank)))) return false;
    }
    return node0.port() > 0 && node1.port() > 0;
  }, 60s)) << node0.stderr_text() << node1.stderr_text();
  for (int port_of_agent : {node0.port(), node1.port()}) {
    std::map<int, std::pair<int, int>> ranks;
    std::string why;
    EXPECT_TRUE(eventually([&] {
      ranks = served_ranks(port_of_agent, why);
      return ranks.size() == 4;
    })) << ranks.size() << " ranks: " << why << "\n" << node0.stderr_text() << node1.stderr_text();
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_EQ(ranks[rank].second, std::stoi(read_file(dir.path() / ("pid_" + std::to_string(rank))))) << rank;
    }
    // c10d numbers the nodes in the order they joined: ranks 0,1 on one node, 2,3 on the other.
    EXPECT_EQ(ranks[0].first, ranks[1].first);
    EXPECT_EQ(ranks[2].first, ranks[3].first);
    EXPECT_NE(ranks[0].first, ranks[2].first);
  }
}

TEST(MultinodeStatus, HangActionStopEndsTheJobOnBothAgents) {
  TempDir runtime;
  ::chmod(runtime.path().c_str(), 0700);
  TempDir dir;
  const int master_port = free_port();
  const std::vector<std::string> job = {"--hang-timeout", "3", "--hang-action", "stop", PLAIN_SGD_BINARY,
                                        "--stall-rank", "1"};
  BoardNode node0(dir, runtime.str(), 0, master_port, job);
  BoardNode node1(dir, runtime.str(), 1, master_port, job);
  const Outcome& end0 = node0.wait(120s);
  const Outcome& end1 = node1.wait(120s);
  const std::string err0 = node0.stderr_text(), err1 = node1.stderr_text();
  EXPECT_EQ(end0.exit_status, 1) << err0;
  EXPECT_EQ(end1.exit_status, 1) << err1;
  // Both agents watch for the hang; each that finds it gathers the whole job's stacks before it
  // acts, so whichever stops its workers first (their samples are up to a second apart) has every
  // rank in its digest and its failure summary, the stalled rank 1 first, wherever it runs. The
  // other learns it from the round's end, names that node, and stops too.
  const bool first0 = err0.find("Root Cause: hang\n") != std::string::npos;
  const std::string& first = first0 ? err0 : err1;
  const std::string& second = first0 ? err1 : err0;
  EXPECT_NE(first.find("ddprun: hang: stopping the workers (--hang-action stop)\n"), std::string::npos) << first;
  EXPECT_NE(first.find("Root Cause: hang\n"), std::string::npos) << err0 << err1;
  EXPECT_NE(first.find("  action    : --hang-action stop\n"), std::string::npos) << first;
  EXPECT_NE(first.find("hang: the whole job (2 nodes):\n"), std::string::npos) << first;
  EXPECT_NE(first.find("  where     : rank 1: stall <- train <- main\n"), std::string::npos) << first;
  EXPECT_NE(first.find("ranks 0,2,3: ddprun::detail::GlooWork::wait <- train <- main\n"), std::string::npos) << first;
  EXPECT_LT(first.find("hang: the whole job"), first.find("ddprun: hang: stopping the workers")) << first;
  EXPECT_NE(second.find("ddprun: the job failed: hang on node "), std::string::npos) << second;
  EXPECT_NE(second.find("no rank made progress for "), std::string::npos) << second;
}

TEST(MultinodeStatus, StragglersAreJudgedAgainstTheJobsMedian) {
  TempDir runtime;
  ::chmod(runtime.path().c_str(), 0700);
  TempDir dir;
  const int master_port = free_port();
  // Node 1's ranks (2 and 3) report at 40 % of node 0's rate. Alone, each node's two ranks are even
  // (and too few to judge); against the job's four, node 1's are below 70 % of the median.
  const std::vector<std::string> job = {"--no-python", PROGRESS_WORKER_BINARY, "--rate", "50", "--seconds", "40",
                                        "--slow-rank", "2,3", "--slow-factor", "0.4"};
  BoardNode node0(dir, runtime.str(), 0, master_port, job);
  BoardNode node1(dir, runtime.str(), 1, master_port, job);
  ASSERT_TRUE(eventually([&] {
    const std::string err = node1.stderr_text();
    return err.find("rank 2 is a straggler") != std::string::npos && err.find("rank 3 is a straggler") != std::string::npos;
  }, 90s)) << node0.stderr_text() << node1.stderr_text();
  const std::string err1 = node1.stderr_text();
  EXPECT_NE(err1.find("the median of the job's ranks is"), std::string::npos) << err1;
  const std::string err0 = node0.stderr_text();
  EXPECT_EQ(err0.find("straggler:"), std::string::npos) << "node 0 named one of its own (or node 1's) ranks\n" << err0;
}

}  // namespace
}  // namespace ddprun::testing

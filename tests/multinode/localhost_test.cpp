// Several ddprun agents on 127.0.0.1, one per "node", on distinct ports: static and dynamic (c10d)
// rendezvous, global ranks across uneven nodes, restarts that all nodes take together, and the
// errors of a job that cannot form.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fstream>
#include <thread>

#include "../support/free_port.hpp"
#include "harness.hpp"
#include "multinode_support.hpp"

using namespace ddprun::testing;
using namespace std::chrono_literals;

namespace {

/// Bounds that only prove "no hang": a job here takes seconds.
constexpr auto kJobBound = std::chrono::seconds(120);

std::vector<std::string> static_node(int nnodes, int node_rank, int port, int nproc) {
  return {"--nnodes=" + std::to_string(nnodes),
          "--node_rank=" + std::to_string(node_rank),
          "--master_addr=127.0.0.1",
          "--master_port=" + std::to_string(port),
          "--nproc_per_node=" + std::to_string(nproc),
          "--rdzv_conf=timeout=60,read_timeout=15"};
}

std::vector<std::string> c10d_node(const std::string& nnodes, int port, const std::string& run_id, int nproc,
                                   const std::string& conf) {
  return {"--nnodes=" + nnodes,
          "--rdzv_backend=c10d",
          "--rdzv_endpoint=127.0.0.1:" + std::to_string(port),
          "--rdzv_id=" + run_id,
          "--nproc_per_node=" + std::to_string(nproc),
          "--rdzv_conf=" + conf};
}

std::vector<std::string> plain_sgd_command() { return concat({plain_sgd_binary()}, plain_sgd_args()); }

/// Starts one agent per argument list, waits for all of them, returns name -> outcome.
std::vector<std::pair<std::string, Outcome>> run_nodes(const std::vector<std::vector<std::string>>& nodes) {
  std::vector<std::unique_ptr<Launch>> launches;
  for (const auto& args : nodes) launches.push_back(std::make_unique<Launch>(args));
  std::vector<std::pair<std::string, Outcome>> outcomes;
  for (std::size_t i = 0; i < launches.size(); ++i) {
    outcomes.emplace_back("node " + std::to_string(i), launches[i]->wait(kJobBound));
  }
  return outcomes;
}

/// Every node's stdout, one after another; each node must have exited 0.
std::string stdout_of_succeeded(const std::vector<std::pair<std::string, Outcome>>& outcomes) {
  std::string out;
  for (const auto& [name, outcome] : outcomes) {
    EXPECT_EQ(outcome.exit_status, 0) << all_output(outcomes);
    out += outcome.out;
  }
  return out;
}

bool port_accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

/// A worker that writes its environment to DIR/<node tag>_local<LOCAL_RANK>.env and exits 0.
std::string env_worker(const TempDir& dir) {
  return write_script(dir, "env_worker", "env > \"$1/$2_local$LOCAL_RANK.env\"\n");
}

/// A worker that records TORCHELASTIC_RESTART_COUNT per rank, fails with 3 as global rank 2 in the
/// first attempt, and is plain_sgd otherwise.
std::string crash_once_worker(const TempDir& dir) {
  std::string sgd = plain_sgd_binary();
  for (const auto& arg : plain_sgd_args()) sgd += " " + arg;
  return write_script(dir, "crash_once",
                      "echo \"$TORCHELASTIC_RESTART_COUNT\" >> \"" + dir.str() +
                          "/restarts_rank$RANK\"\n"
                          "if [ \"$RANK\" = 2 ] && [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exit 3; fi\n"
                          "exec " +
                          sgd + "\n");
}

}  // namespace

TEST(Localhost, StaticThreeNodesTrainPlainSgd) {
  int port = free_port();
  auto outcomes = run_nodes({concat(static_node(3, 0, port, 2), plain_sgd_command()),
                             concat(static_node(3, 1, port, 2), plain_sgd_command()),
                             concat(static_node(3, 2, port, 2), plain_sgd_command())});
  for (const auto& [name, outcome] : outcomes) EXPECT_EQ(outcome.exit_status, 0) << all_output(outcomes);
  const std::string& rank0 = outcomes[0].second.out;  // global rank 0 is local rank 0 of node 0
  EXPECT_EQ(plain_sgd_missing(rank0, 6), "") << all_output(outcomes);
}

TEST(Localhost, StaticUnevenNodesGetContiguousGlobalRanks) {
  TempDir dir;
  std::string worker = env_worker(dir);
  int port = free_port();
  const std::vector<int> nprocs{2, 1, 3};
  std::vector<std::vector<std::string>> nodes;
  for (int node = 0; node < 3; ++node) {
    nodes.push_back(
        concat(static_node(3, node, port, nprocs[node]), {worker, dir.str(), "node" + std::to_string(node)}));
  }
  auto outcomes = run_nodes(nodes);
  for (const auto& [name, outcome] : outcomes) ASSERT_EQ(outcome.exit_status, 0) << all_output(outcomes);

  int expected_rank = 0;
  for (int node = 0; node < 3; ++node) {
    for (int local = 0; local < nprocs[node]; ++local, ++expected_rank) {
      auto file = dir.path() / ("node" + std::to_string(node) + "_local" + std::to_string(local) + ".env");
      ASSERT_TRUE(std::filesystem::exists(file)) << file;
      auto env = parse_env_file(file);
      SCOPED_TRACE("node " + std::to_string(node) + " local rank " + std::to_string(local));
      EXPECT_EQ(env["RANK"], std::to_string(expected_rank));
      EXPECT_EQ(env["LOCAL_RANK"], std::to_string(local));
      EXPECT_EQ(env["LOCAL_WORLD_SIZE"], std::to_string(nprocs[node]));
      EXPECT_EQ(env["WORLD_SIZE"], "6");
      EXPECT_EQ(env["GROUP_RANK"], std::to_string(node));
      EXPECT_EQ(env["GROUP_WORLD_SIZE"], "3");
      EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
      EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "none");
      EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
      // The agent store on --master-port, as torchrun's static jobs (--worker-store agent).
      EXPECT_EQ(env["MASTER_PORT"], std::to_string(port));
      EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "True");
    }
  }
}

TEST(Localhost, DynamicThreeAgentsFormOneRoundOfAllThree) {
  int port = free_port();
  // The last call is long enough for all three to be in; the third closes the round (MAX) at once.
  const std::string conf = "join_timeout=60,last_call_timeout=20";
  std::vector<std::vector<std::string>> nodes(3,
                                              concat(c10d_node("2:3", port, "mn-dyn3", 2, conf), plain_sgd_command()));
  auto outcomes = run_nodes(nodes);
  std::string out = stdout_of_succeeded(outcomes);
  EXPECT_EQ(plain_sgd_missing(out, 6), "") << all_output(outcomes);
}

TEST(Localhost, DynamicFormsWithMinNodesAfterTheLastCall) {
  int port = free_port();
  const std::string conf = "join_timeout=60,last_call_timeout=1";
  std::vector<std::vector<std::string>> nodes(2,
                                              concat(c10d_node("2:3", port, "mn-dyn2", 2, conf), plain_sgd_command()));
  auto outcomes = run_nodes(nodes);
  std::string out = stdout_of_succeeded(outcomes);
  EXPECT_EQ(plain_sgd_missing(out, 4), "") << all_output(outcomes);
}

TEST(Localhost, StaticWorkerCrashRestartsEveryNodeTogether) {
  TempDir dir;
  std::string worker = crash_once_worker(dir);
  int port = free_port();
  auto outcomes = run_nodes({concat(static_node(2, 0, port, 2), {"--max_restarts=1", worker}),
                             concat(static_node(2, 1, port, 2), {"--max_restarts=1", worker})});
  for (const auto& [name, outcome] : outcomes) EXPECT_EQ(outcome.exit_status, 0) << all_output(outcomes);
  EXPECT_EQ(plain_sgd_missing(outcomes[0].second.out, 4), "") << all_output(outcomes);
  // Rank 2 (node 1) failed in attempt 0; every rank of both nodes ran attempt 1 (the others may
  // have been stopped in attempt 0 before they wrote anything).
  EXPECT_EQ(read_file(dir.path() / "restarts_rank2"), "0\n1\n");
  for (int rank = 0; rank < 4; ++rank) {
    auto lines = split_lines(read_file(dir.path() / ("restarts_rank" + std::to_string(rank))));
    ASSERT_FALSE(lines.empty()) << "rank " << rank << " never ran";
    EXPECT_EQ(lines.back(), "1") << "rank " << rank << " did not run with TORCHELASTIC_RESTART_COUNT=1 last";
  }
}

TEST(Localhost, DynamicWorkerCrashRestartsEveryNodeTogether) {
  TempDir dir;
  std::string worker = crash_once_worker(dir);
  int port = free_port();
  const std::string conf = "join_timeout=60,last_call_timeout=1";
  std::vector<std::vector<std::string>> nodes(
      2, concat(c10d_node("2:3", port, "mn-dyn-crash", 2, conf), {"--max_restarts=1", worker}));
  auto outcomes = run_nodes(nodes);
  std::string out = stdout_of_succeeded(outcomes);
  EXPECT_EQ(plain_sgd_missing(out, 4), "") << all_output(outcomes);
  EXPECT_EQ(read_file(dir.path() / "restarts_rank2"), "0\n1\n");
  for (int rank = 0; rank < 4; ++rank) {
    auto lines = split_lines(read_file(dir.path() / ("restarts_rank" + std::to_string(rank))));
    ASSERT_FALSE(lines.empty()) << "rank " << rank << " never ran";
    EXPECT_EQ(lines.back(), "1") << "rank " << rank << " did not run with TORCHELASTIC_RESTART_COUNT=1 last";
  }
}

namespace {

/// Rank 0 finishes at once; rank 1 says it started, then waits (at most 2 min) for DIR/go and
/// exits with `late_exit` in attempt 0, 0 after. Every rank appends its restart count to DIR/done_<RANK>.
std::string barrier_worker(const TempDir& dir, int late_exit) {
  const std::string d = "\"" + dir.str() + "\"";
  return write_script(dir, "barrier_worker",
                      "status=0\n"
                      "if [ \"$RANK\" = 1 ]; then\n"
                      "  touch " +
                          d +
                          "/started_1_$TORCHELASTIC_RESTART_COUNT\n"
                          "  if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then\n"
                          "    i=0; while [ ! -e " +
                          d +
                          "/go ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done\n"
                          "    status=" +
                          std::to_string(late_exit) +
                          "\n"
                          "  fi\n"
                          "fi\n"
                          "echo \"$TORCHELASTIC_RESTART_COUNT\" >> " +
                          d +
                          "/done_$RANK\n"
                          "exit $status\n");
}

}  // namespace

TEST(Localhost, FirstNodeToFinishWaitsForTheOthers) {
  TempDir dir;
  std::string worker = barrier_worker(dir, 0);
  int port = free_port();
  Launch node0(concat(static_node(2, 0, port, 1), {worker}));
  Launch node1(concat(static_node(2, 1, port, 1), {worker}));
  ASSERT_TRUE(files_appear(dir, {"done_0", "started_1_0"}, 60s)) << "the workers did not start";
  // Node 0's work is done, node 1's is not: node 0 stays (a missing barrier would exit at once).
  EXPECT_FALSE(eventually([&] { return !process_alive(node0.pid()); }, 1s)) << "node 0 left before node 1 finished";
  std::ofstream(dir.path() / "go").close();
  Outcome outcome0 = node0.wait(60s);
  Outcome outcome1 = node1.wait(60s);
  auto outcomes = std::vector<std::pair<std::string, Outcome>>{{"node 0", outcome0}, {"node 1", outcome1}};
  EXPECT_EQ(outcome0.exit_status, 0) << all_output(outcomes);
  EXPECT_EQ(outcome1.exit_status, 0) << all_output(outcomes);
}

TEST(Localhost, NodeThatFinishedRestartsWithTheOthersAfterALateFailure) {
  TempDir dir;
  std::string worker = barrier_worker(dir, 3);
  int port = free_port();
  Launch node0(concat(static_node(2, 0, port, 1), {"--max_restarts=1", worker}));
  Launch node1(concat(static_node(2, 1, port, 1), {"--max_restarts=1", worker}));
  ASSERT_TRUE(files_appear(dir, {"done_0", "started_1_0"}, 60s)) << "the workers did not start";
  std::ofstream(dir.path() / "go").close();  // rank 1 now fails, after rank 0 has finished
  Outcome outcome0 = node0.wait(60s);
  Outcome outcome1 = node1.wait(60s);
  auto outcomes = std::vector<std::pair<std::string, Outcome>>{{"node 0", outcome0}, {"node 1", outcome1}};
  EXPECT_EQ(outcome0.exit_status, 0) << all_output(outcomes);
  EXPECT_EQ(outcome1.exit_status, 0) << all_output(outcomes);
  EXPECT_EQ(read_file(dir.path() / "done_0"), "0\n1\n") << "rank 0 did not run again with the others";
  EXPECT_EQ(read_file(dir.path() / "done_1"), "0\n1\n");
}

// The exit barrier's other side: the store's host (node 0) is done first and waits; the last node
// to finish ends the round, and every node, the last one included, must see that end before the
// store goes away with its host. Run with the last node being a client, then the host itself.
TEST(Localhost, EveryNodeSeesTheEndWhoeverFinishesLast) {
  for (int last : {3, 0}) {
    SCOPED_TRACE("node " + std::to_string(last) + " finishes last");
    TempDir dir;
    std::string worker =
        write_script(dir, "last", "[ \"$RANK\" = " + std::to_string(last) + " ] && sleep 0.5\nexit 0\n");
    int port = free_port();
    std::vector<std::vector<std::string>> nodes;
    for (int node = 0; node < 4; ++node) nodes.push_back(concat(static_node(4, node, port, 1), {worker}));
    auto outcomes = run_nodes(nodes);
    for (const auto& [name, outcome] : outcomes) EXPECT_EQ(outcome.exit_status, 0) << all_output(outcomes);
  }
}

TEST(Localhost, StaticJoinTimeoutSaysTheJobDidNotForm) {
  int port = free_port();
  Launch node0(concat({"--nnodes=2", "--node_rank=0", "--master_addr=127.0.0.1",
                       "--master_port=" + std::to_string(port), "--nproc_per_node=1", "--rdzv_conf=timeout=2"},
                      {"/bin/true"}));
  Outcome outcome = node0.wait(60s);
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_NE(outcome.err.find("did not form"), std::string::npos) << outcome.err;
  EXPECT_EQ(first_unprefixed_line(outcome.err), "") << outcome.err;
}

TEST(Localhost, MismatchedRunIdsOnOneEndpointAreRefused) {
  int port = free_port();
  const std::string conf = "join_timeout=60";
  Launch host(concat(c10d_node("2:2", port, "job-alpha", 1, conf), {"/bin/true"}));
  ASSERT_TRUE(eventually([&] { return port_accepts(port); }, 30s)) << "the first agent never listened on " << port;
  auto start = std::chrono::steady_clock::now();
  Launch other(concat(c10d_node("2:2", port, "job-beta", 1, conf), {"/bin/true"}));
  Outcome outcome = other.wait(60s);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_NE(outcome.err.find("job-alpha"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("job-beta"), std::string::npos) << outcome.err;
  EXPECT_EQ(first_unprefixed_line(outcome.err), "") << outcome.err;
  // Refused at once, not after the 60 s join timeout (a bound that only proves it did not wait).
  EXPECT_LT(elapsed, 30s);
  host.send(SIGKILL);
  host.wait(10s);
}

namespace {

/// Is there an IPv6 loopback to listen on? (Containers without IPv6 have none.)
bool has_ipv6_loopback() {
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

TEST(Localhost, Ipv6EndpointFormsTheJobAndWorkersDialIpv6) {
  if (!has_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  TempDir dir;
  std::string worker = env_worker(dir);
  const int port = free_port();
  std::vector<std::vector<std::string>> nodes;
  for (const char* tag : {"a", "b"}) {
    nodes.push_back({"--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=[::1]:" + std::to_string(port),
                     "--rdzv_id=v6", worker, dir.str(), tag});
  }
  auto outcomes = run_nodes(nodes);
  for (const auto& [name, outcome] : outcomes) ASSERT_EQ(outcome.exit_status, 0) << all_output(outcomes);
  for (const char* tag : {"a", "b"}) {
    auto env = read_file(dir.path() / (std::string(tag) + "_local0.env"));
    EXPECT_NE(env.find("MASTER_ADDR=::1\n"), std::string::npos) << env;
    EXPECT_NE(env.find("WORLD_SIZE=2\n"), std::string::npos) << env;
  }
}

TEST(Localhost, OnAStandingStoreANodeArrivingAfterTheJobFinishedIsToldItIsClosed) {
  // A store that outlives the job (ddprun-store, with is_host=0 on every agent), as a cluster may run.
  TempDir dir;
  const int port = free_port();
  Launch store(Launch::Command{{ddprun_store_binary(), "--host", "127.0.0.1", "--port", std::to_string(port)}});
  ASSERT_TRUE(eventually([&] { return port_accepts(port); }, 20s));
  const std::string conf = "is_host=0,join_timeout=30";
  auto outcomes = run_nodes({concat(c10d_node("2", port, "closed", 1, conf), {"/bin/true"}),
                             concat(c10d_node("2", port, "closed", 1, conf), {"/bin/true"})});
  for (const auto& [name, outcome] : outcomes) ASSERT_EQ(outcome.exit_status, 0) << all_output(outcomes);

  Outcome late = run_ddprun(concat(c10d_node("2", port, "closed", 1, conf), {"/bin/true"}));
  EXPECT_EQ(late.exit_status, 1) << late.err;
  EXPECT_NE(late.err.find("rendezvous closed: job 'closed' already finished"), std::string::npos) << late.err;
  EXPECT_EQ(first_unprefixed_line(late.err), "") << late.err;
  store.send(SIGTERM);
  store.wait(10s);
}

TEST(Localhost, ANodeStoppedBySignalLetsTheOthersReformWithoutWaitingForHeartbeats) {
  TempDir dir;
  const int port = free_port();
  // Heartbeats would notice the stopped node only after 10 min: the 'left' end must do it at once.
  const std::string conf = "keep_alive_interval=200,keep_alive_max_attempt=3,last_call_timeout=0.2,join_timeout=60";
  std::string worker = write_script(dir, "sleeper",
                                    "echo $$ > \"" + dir.str() + "/w${WORLD_SIZE}_r$RANK\"\n"
                                    "if [ \"$WORLD_SIZE\" = 2 ]; then exit 0; fi\nexec sleep 600\n");
  std::vector<std::unique_ptr<Launch>> nodes;
  // Node 0 first, so that it hosts the store: the node stopped below must not take the store along.
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<Launch>(concat(c10d_node("2:3", port, "left", 1, conf), {worker})));
    if (i == 0) {
      ASSERT_TRUE(eventually([&] { return port_accepts(port); }, 30s));
    }
  }
  ASSERT_TRUE(files_appear(dir, {"w3_r0", "w3_r1", "w3_r2"}, 60s));
  nodes[2]->send(SIGTERM);
  Outcome stopped = nodes[2]->wait(kJobBound);
  EXPECT_EQ(stopped.exit_status, 128 + SIGTERM) << stopped.err;
  for (int i = 0; i < 2; ++i) {
    Outcome outcome = nodes[static_cast<std::size_t>(i)]->wait(60s);
    EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
    EXPECT_NE(outcome.err.find("left (SIGTERM); stopping the workers to form a new round"), std::string::npos)
        << outcome.err;
  }
}

}  // namespace

// Nodes as network namespaces (NetnsLab): each agent has its own address, the store lives on node
// A, and nodes are killed, cut off or added while a job runs. Needs root; skips without it.
//
// The rendezvous settings are short so that a lost node is noticed in 1.5 s (0.5 s x 3) and a lost
// store in 5 s; the bounds below only prove "no hang", except the one the contract states: a node
// whose link is cut is dropped within keep_alive_interval x keep_alive_max_attempt plus a margin.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "harness.hpp"
#include "multinode_support.hpp"
#include "netns_lab.hpp"

using namespace ddprun::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kStorePort = 29400;  // every namespace has its own ports: no clash with anything
const std::string kConf =
    "keep_alive_interval=0.5,keep_alive_max_attempt=3,last_call_timeout=1,read_timeout=5,join_timeout=60";
constexpr auto kLostAfter = 1500ms;  // keep_alive_interval x keep_alive_max_attempt
constexpr auto kReadTimeout = 5s;
constexpr auto kJobBound = std::chrono::seconds(60);

#define MAKE_LAB(lab, nodes)                   \
  std::string why_not;                         \
  auto lab = NetnsLab::create(nodes, why_not); \
  if (!lab) GTEST_SKIP() << why_not

/// Worker scripts. Each leaves `<DIR>/w<WORLD_SIZE>_r<RANK>_<node>` holding its pid when it starts
/// (the pid is the program's: the script execs it), so that the test sees which round runs.
std::string marker_line(const TempDir& dir) { return "echo $$ > \"" + dir.str() + "/w${WORLD_SIZE}_r${RANK}_$1\"\n"; }

/// plain_sgd, slowed so that a run lasts about 10 s with 6 workers (100 steps of 100 ms).
std::string sgd_worker(const TempDir& dir) {
  std::string sgd = plain_sgd_binary() + " --epochs 1 --step-delay-ms 100";
  for (const auto& arg : plain_sgd_args()) sgd += " " + arg;
  return write_script(dir, "sgd_worker", marker_line(dir) + "exec " + sgd + "\n");
}

/// Sleeps until stopped unless the world has `done_at` workers, where it says so and succeeds.
std::string sleeper_worker(const TempDir& dir, int done_at) {
  return write_script(dir, "sleeper",
                      marker_line(dir) + "if [ \"$WORLD_SIZE\" = " + std::to_string(done_at) +
                          " ]; then echo \"sleeper: rank $RANK of $WORLD_SIZE done\"; exit 0; fi\n"
                          "exec sleep 600\n");
}

/// `w<world>_r<rank>_` for every rank of a world: the markers of a round that started everywhere.
std::vector<std::string> markers_of_world(const TempDir& dir, int world) {
  std::vector<std::string> names;
  const std::string prefix = "w" + std::to_string(world).append("_r");
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    std::string name = entry.path().filename().string();
    if (name.starts_with(prefix)) names.push_back(name);
  }
  return names;
}

/// The agents of one job, with what each printed once it has ended.
class Job {
 public:
  explicit Job(const NetnsLab& lab) : lab_(lab) {}
  /// With DDPRUN_TEST_VERBOSE set, shows what every agent printed, also when the test passed.
  ~Job() {
    if (std::getenv("DDPRUN_TEST_VERBOSE") != nullptr) std::cout << report();
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  /// Starts a c10d agent on `node` with the store on node 0 (A); `nnodes` is MIN:MAX. No
  /// --local-addr: each node advertises its address towards the endpoint, as on real machines.
  void start_c10d(int node, const std::string& nnodes, const std::string& worker) {
    std::vector<std::string> command{
        ddprun_binary(),        "--nnodes=" + nnodes,
        "--rdzv_backend=c10d",  "--rdzv_endpoint=" + lab_.address(0) + ":" + std::to_string(kStorePort),
        "--rdzv_id=mn-netns",   "--nproc_per_node=2",
        "--rdzv_conf=" + kConf, worker,
        node_tag(node)};
    start(node, command);
  }

  /// Starts `command` (ddprun and its arguments) on `node`.
  void start(int node, const std::vector<std::string>& command) {
    if (static_cast<int>(agents_.size()) <= node) {
      agents_.resize(node + 1);
      outcomes_.resize(node + 1);
    }
    agents_[node] = std::make_unique<Launch>(Launch::Command{lab_.in_node(node, command)});
  }

  Launch& agent(int node) { return *agents_.at(node); }

  /// Waits for `node`'s agent to end (bounded; past the bound the harness kills it and fails).
  const Outcome& finish(int node, std::chrono::milliseconds bound = kJobBound) {
    if (!outcomes_.at(node)) outcomes_[node] = agents_.at(node)->wait(bound);
    return *outcomes_[node];
  }

  /// For a node that may run on legitimately: up to `bound` to end by itself, then SIGKILL.
  /// Returns whether it ended by itself.
  bool finish_or_kill(int node, std::chrono::milliseconds bound) {
    Outcome outcome;
    bool ended = ends_by_itself(*agents_.at(node), bound, outcome);
    outcomes_[node] = outcome;
    return ended;
  }

  /// Waits until a round of `world` workers has started everywhere, up to `timeout`; gives up at
  /// once when one of `watched` (default: all) ends, since then it never will.
  ::testing::AssertionResult world_started(const TempDir& dir, int world, std::chrono::milliseconds timeout,
                                           std::vector<int> watched = {}) {
    if (watched.empty()) {
      for (int node = 0; node < static_cast<int>(agents_.size()); ++node) watched.push_back(node);
    }
    bool someone_ended = false;
    bool started = eventually(
        [&] {
          for (int node : watched) someone_ended = someone_ended || !process_alive(agents_.at(node)->pid());
          return someone_ended || static_cast<int>(markers_of_world(dir, world).size()) >= world;
        },
        timeout);
    if (started && !someone_ended) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "no round of " << world << " workers started"
                                         << (someone_ended ? " (an agent ended)" : "") << "\n"
                                         << report();
  }

  /// Ends every agent still running (10 s each to end by itself, then SIGKILL) and returns
  /// everybody's output, for a failure message.
  std::string report() {
    std::vector<std::pair<std::string, Outcome>> all;
    for (int node = 0; node < static_cast<int>(agents_.size()); ++node) {
      if (!agents_[node]) continue;
      if (!outcomes_[node]) {
        // A moment to end by itself (it may be stopping its workers), so that its exit status tells.
        Outcome outcome;
        ends_by_itself(*agents_[node], std::chrono::seconds(10), outcome);
        outcomes_[node] = outcome;
      }
      all.emplace_back(node_name(node), *outcomes_[node]);
    }
    return all_output(all);
  }

  /// The stdout of `nodes` together (rank 0 may be on any of them).
  std::string out(const std::vector<int>& nodes) {
    std::string text;
    for (int node : nodes) text += finish(node).out;
    return text;
  }

  static std::string node_name(int node) { return std::string("node ") + static_cast<char>('A' + node); }
  static std::string node_tag(int node) { return std::string("node") + static_cast<char>('A' + node); }

 private:
  const NetnsLab& lab_;
  std::vector<std::unique_ptr<Launch>> agents_;
  std::vector<std::optional<Outcome>> outcomes_;
};

/// The pids that the workers of the round of `world` wrote, on `node_tag` or (empty) any node.
std::vector<pid_t> worker_pids(const TempDir& dir, int world, const std::string& node_tag = "") {
  std::vector<pid_t> pids;
  for (const auto& name : markers_of_world(dir, world)) {
    if (node_tag.empty() || name.ends_with("_" + node_tag)) {
      pids.push_back(static_cast<pid_t>(std::stol(read_file(dir.path() / name))));
    }
  }
  return pids;
}

/// Every pid in `pids` is gone within `timeout`.
bool all_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  return eventually(
      [&] {
        for (pid_t pid : pids) {
          if (process_alive(pid)) return false;
        }
        return true;
      },
      timeout);
}

}  // namespace

TEST(Netns, ThreeNodesTrainPlainSgd) {
  MAKE_LAB(lab, 3);
  TempDir dir;
  Job job(*lab);
  for (int node = 0; node < 3; ++node) job.start_c10d(node, "2:3", sgd_worker(dir));
  for (int node = 0; node < 3; ++node) EXPECT_EQ(job.finish(node).exit_status, 0) << job.report();
  std::string out = job.out({0, 1, 2});
  EXPECT_EQ(plain_sgd_missing(out, 6), "") << job.report();
}

// (a) A node's agent is SIGKILLed mid-run: its workers die with it, the two others go on as a job
// of 4 workers, without using a restart (--max_restarts is 0).
TEST(Netns, KilledAgentLeavesTheOthersToFinishSmaller) {
  MAKE_LAB(lab, 3);
  TempDir dir;
  Job job(*lab);
  for (int node = 0; node < 3; ++node) job.start_c10d(node, "2:3", sgd_worker(dir));
  ASSERT_TRUE(job.world_started(dir, 6, 60s));
  std::this_thread::sleep_for(2s);  // mid-run: some of the 100 steps are done
  job.agent(2).send(SIGKILL);
  EXPECT_EQ(job.finish(2, 10s).exit_status, 128 + SIGKILL);

  for (int node = 0; node < 2; ++node) EXPECT_EQ(job.finish(node).exit_status, 0) << job.report();
  std::string out = job.out({0, 1});
  EXPECT_EQ(plain_sgd_missing(out, 4), "") << job.report();
  std::vector<pid_t> c_workers = worker_pids(dir, 6, Job::node_tag(2));
  EXPECT_EQ(c_workers.size(), 2u);
  EXPECT_TRUE(all_gone(c_workers, 10s)) << "node C's workers outlived their SIGKILLed agent";
}

// (a') The same when the workers are in no collective: they only sleep, nothing fails, so only the
// rendezvous can tell the survivors; their sleepers are stopped and restarted in a round of 4.
TEST(Netns, KilledAgentRestartsTheSurvivorsSleepingWorkers) {
  MAKE_LAB(lab, 3);
  TempDir dir;
  Job job(*lab);
  for (int node = 0; node < 3; ++node) job.start_c10d(node, "2:3", sleeper_worker(dir, 4));
  ASSERT_TRUE(job.world_started(dir, 6, 60s));
  job.agent(2).send(SIGKILL);
  job.finish(2, 10s);

  for (int node = 0; node < 2; ++node) EXPECT_EQ(job.finish(node).exit_status, 0) << job.report();
  std::string out = job.out({0, 1});
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(out.find("sleeper: rank " + std::to_string(rank) + " of 4 done"), std::string::npos) << job.report();
  }
  EXPECT_TRUE(all_gone(worker_pids(dir, 6), 10s)) << "sleepers of the round of 6 are still running";
}

// (b) Node C's link is cut mid-run: no connection is reset, the survivors' workers hang in an
// all-reduce with C's, so only C's missing heartbeats tell. A and B drop C within
// keep_alive_interval x keep_alive_max_attempt plus a margin and finish as a job of 4; C loses the
// store and stops by itself.
TEST(Netns, CutLinkIsDetectedByHeartbeatsAndTheOthersFinish) {
  MAKE_LAB(lab, 3);
  TempDir dir;
  Job job(*lab);
  for (int node = 0; node < 3; ++node) job.start_c10d(node, "2:3", sgd_worker(dir));
  ASSERT_TRUE(job.world_started(dir, 6, 60s));
  std::this_thread::sleep_for(2s);
  // Only a round of 4 that starts after the cut counts (a first round may have formed without C).
  for (const auto& name : markers_of_world(dir, 4)) std::filesystem::remove(dir.path() / name);
  auto cut_at = std::chrono::steady_clock::now();
  lab->cut(2);
  // The margin covers stopping the workers (SIGTERM ends them at once) and forming the round, which
  // needs no last call: the survivors are expected back.
  constexpr auto kMargin = 8s;
  auto detected = job.world_started(dir, 4, kLostAfter + kMargin, {0, 1});
  auto detected_after = std::chrono::steady_clock::now() - cut_at;
  ASSERT_TRUE(detected) << "C was not dropped within " << (kLostAfter + kMargin).count() << " ms of the cut";
  std::cout << "[ INFO     ] the round of 4 started "
            << std::chrono::duration_cast<std::chrono::milliseconds>(detected_after).count()
            << " ms after the cut (a node is lost after " << kLostAfter.count() << " ms)\n";

  for (int node = 0; node < 2; ++node) EXPECT_EQ(job.finish(node).exit_status, 0) << job.report();
  std::string out = job.out({0, 1});
  EXPECT_EQ(plain_sgd_missing(out, 4), "") << job.report();
  // C, cut off from the store, gives up after read_timeout (bounded here, never waited on forever).
  EXPECT_TRUE(job.finish_or_kill(2, kReadTimeout + 25s)) << "node C did not stop by itself\n" << job.report();
  EXPECT_NE(job.finish(2).exit_status, 0) << job.report();
}

// (c) A fourth node arrives while three run (MAX 4): a new round takes it in, the job goes on with
// 8 workers, and no restart is used (--max_restarts is 0).
TEST(Netns, FourthNodeJoiningMidRunWidensTheJob) {
  MAKE_LAB(lab, 4);
  TempDir dir;
  Job job(*lab);
  std::string worker = sgd_worker(dir);
  for (int node = 0; node < 3; ++node) job.start_c10d(node, "2:4", worker);
  ASSERT_TRUE(job.world_started(dir, 6, 60s));
  std::this_thread::sleep_for(2s);
  job.start_c10d(3, "2:4", worker);

  for (int node = 0; node < 4; ++node) EXPECT_EQ(job.finish(node).exit_status, 0) << job.report();
  std::string out = job.out({0, 1, 2, 3});
  EXPECT_EQ(plain_sgd_missing(out, 8), "") << job.report();
  EXPECT_EQ(out.find("plain_sgd: rank 0 of 6,"), std::string::npos) << "the round of 6 ran to its end\n"
                                                                    << job.report();
}

namespace {

/// B and C end by themselves with exit 1 and `lost the rendezvous store` within read_timeout plus
/// a margin of `since` (when the store went away).
void expect_store_lost(Job& job, std::chrono::steady_clock::time_point since) {
  constexpr auto kBound = kReadTimeout + 15s;
  for (int node = 1; node < 3; ++node) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(kBound - (std::chrono::steady_clock::now() - since));
    EXPECT_TRUE(job.finish_or_kill(node, std::max(left, std::chrono::milliseconds(1))))
        << Job::node_name(node) << " still ran " << kBound.count() << " s after losing the store";
    std::cout << "[ INFO     ] " << Job::node_name(node) << " ended "
              << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count()
              << " ms after the store went away (read_timeout " << kReadTimeout.count() << " s)\n";
  }
  for (int node = 1; node < 3; ++node) {
    EXPECT_EQ(job.finish(node).exit_status, 1) << job.report();
    EXPECT_NE(job.finish(node).err.find("lost the rendezvous store"), std::string::npos) << job.report();
  }
}

}  // namespace

// (d) Node A, which hosts the store, is SIGKILLed: B and C stop their workers and exit 1, saying
// they lost the store, within read_timeout (plus a margin), never hanging. The workers sleep, so
// no worker failure can end the job first.
TEST(Netns, KilledStoreHostEndsTheOthersWithAnError) {
  MAKE_LAB(lab, 3);
  TempDir dir;
  Job job(*lab);
  for (int node = 0; node < 3; ++node) job.start_c10d(node, "2:3", sleeper_worker(dir, 0));
  ASSERT_TRUE(job.world_started(dir, 6, 60s));
  auto killed_at = std::chrono::steady_clock::now();
  job.agent(0).send(SIGKILL);
  job.finish(0, 10s);
  expect_store_lost(job, killed_at);
  EXPECT_TRUE(all_gone(worker_pids(dir, 6), 10s)) << "workers outlived the job";
}

// (d') The store host's link is cut instead: no connection ends, so only read_timeout can tell B
// and C; they still exit 1 with the same error, never hanging.
TEST(Netns, CutOffStoreHostEndsTheOthersWithAnError) {
  MAKE_LAB(lab, 3);
  TempDir dir;
  Job job(*lab);
  for (int node = 0; node < 3; ++node) job.start_c10d(node, "2:3", sleeper_worker(dir, 0));
  ASSERT_TRUE(job.world_started(dir, 6, 60s));
  auto cut_at = std::chrono::steady_clock::now();
  lab->cut(0);
  expect_store_lost(job, cut_at);
  job.finish_or_kill(0, 1s);  // A, alone with its store, would wait for its join timeout
  EXPECT_TRUE(all_gone(worker_pids(dir, 6, Job::node_tag(1)), 10s)) << "B's workers outlived B";
  EXPECT_TRUE(all_gone(worker_pids(dir, 6, Job::node_tag(2)), 10s)) << "C's workers outlived C";
}

// (e) Static rendezvous across two machines: node 0 on A (the store, --master_addr), node 1 on B;
// a worker of node 1 fails once, and both nodes restart together and succeed.
TEST(Netns, StaticTwoNodesRestartTogetherAfterAWorkerCrash) {
  MAKE_LAB(lab, 2);
  TempDir dir;
  std::string sgd = plain_sgd_binary();
  for (const auto& arg : plain_sgd_args()) sgd += " " + arg;
  std::string worker =
      write_script(dir, "crash_once",
                   "echo \"$TORCHELASTIC_RESTART_COUNT\" >> \"" + dir.str() +
                       "/restarts_rank$RANK\"\n"
                       "if [ \"$RANK\" = 2 ] && [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exit 3; fi\n"
                       "exec " +
                       sgd + "\n");
  Job job(*lab);
  for (int node = 0; node < 2; ++node) {
    job.start(node, {ddprun_binary(), "--nnodes=2", "--node_rank=" + std::to_string(node),
                     "--master_addr=" + lab->address(0), "--master_port=29500", "--nproc_per_node=2",
                     "--max_restarts=1", "--rdzv_conf=timeout=60,read_timeout=15", worker});
  }
  for (int node = 0; node < 2; ++node) EXPECT_EQ(job.finish(node).exit_status, 0) << job.report();
  EXPECT_EQ(plain_sgd_missing(job.out({0}), 4), "") << job.report();
  EXPECT_EQ(read_file(dir.path() / "restarts_rank2"), "0\n1\n");
  for (int rank = 0; rank < 4; ++rank) {
    auto lines = split_lines(read_file(dir.path() / ("restarts_rank" + std::to_string(rank))));
    ASSERT_FALSE(lines.empty()) << "rank " << rank << " never ran";
    EXPECT_EQ(lines.back(), "1") << "rank " << rank << " did not run with TORCHELASTIC_RESTART_COUNT=1 last";
  }
}

// An agent that stands still (SIGSTOP, then SIGCONT), as several ddprun agents on 127.0.0.1: it
// says that it was itself unresponsive, instead of blaming the other node or the store for the
// silence it caused, and the job goes on.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "../support/free_port.hpp"
#include "harness.hpp"
#include "multinode_support.hpp"

using namespace ddprun::testing;
using namespace std::chrono_literals;

namespace {

constexpr auto kBound = std::chrono::seconds(90);

/// Runs a static job of two nodes and stops node `stopped` for `stop` once both workers run.
/// Timeouts are short next to the stop: a lost node after 0.9 s, a stall beyond 1 s.
std::vector<std::pair<std::string, Outcome>> stop_one_node(int stopped, std::chrono::milliseconds stop,
                                                           const std::string& read_timeout) {
  TempDir dir;
  const std::string worker = wait_for_go_worker(dir);
  const int port = free_port();
  const std::string conf = "timeout=30,keep_alive_interval=0.3,keep_alive_max_attempt=3,heartbeat_timeout=1,"
                           "read_timeout=" + read_timeout;
  Launch node0(concat(static_flags(2, 0, port, conf), {worker}));
  Launch node1(concat(static_flags(2, 1, port, conf), {worker}));
  Launch* target = stopped == 0 ? &node0 : &node1;
  EXPECT_TRUE(files_appear(dir, {"started_0", "started_1"}, 60s)) << "the job did not start";
  target->send(SIGSTOP);
  std::this_thread::sleep_for(stop);
  target->send(SIGCONT);
  // Whether or not the stop made the job form a new round, its workers end now.
  std::ofstream(dir.path() / "go").close();
  return {{"node 0", node0.wait(kBound)}, {"node 1", node1.wait(kBound)}};
}

}  // namespace

TEST(Stall, AClientNodeStoppedPastItsTimeoutsSaysItWasUnresponsiveAndRejoins) {
  // Stopped longer than read_timeout: nothing of the store's silence was the store's doing.
  auto outcomes = stop_one_node(1, 4s, "2");
  for (const auto& [name, outcome] : outcomes) {
    EXPECT_EQ(outcome.exit_status, 0) << all_output(outcomes);
    EXPECT_EQ(outcome.err.find("lost the rendezvous store"), std::string::npos) << all_output(outcomes);
  }
  const std::string& err1 = outcomes[1].second.err;
  EXPECT_NE(err1.find("this agent was unresponsive for "), std::string::npos) << all_output(outcomes);
  EXPECT_NE(err1.find("(stopped or starved?)"), std::string::npos) << all_output(outcomes);
}

TEST(Stall, TheStoppedHostSaysItWasUnresponsive) {
  // The store stood still with its host: the other node could not beat meanwhile, and the host
  // must not take that for the other node's fault.
  auto outcomes = stop_one_node(0, 4s, "15");
  for (const auto& [name, outcome] : outcomes) {
    EXPECT_EQ(outcome.exit_status, 0) << all_output(outcomes);
    EXPECT_EQ(outcome.err.find("lost the rendezvous store"), std::string::npos) << all_output(outcomes);
  }
  EXPECT_NE(outcomes[0].second.err.find("this agent was unresponsive for "), std::string::npos) << all_output(outcomes);
}

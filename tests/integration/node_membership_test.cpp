// NodeMembership against a real StoreServer on loopback: several memberships on one io_context, as
// several agents' loops would be, with nothing but that loop (no threads of their own): rounds that
// form and finish, a node dropped when its heartbeat stops, failures reported after peer probes,
// a lost store, and a membership destroyed in the middle of a join.
#include "rendezvous/node_membership.hpp"

#include <gtest/gtest.h>

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it in C++20

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>

#include "rendezvous/store_server.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/loopback_store.hpp"
#include "tests/support/round_fixtures.hpp"
#include "tests/support/spawn_task.hpp"

using namespace ddprun::rendezvous;
using namespace std::chrono_literals;
using boost::asio::ip::tcp;

namespace {

/// What one membership told its agent, in order.
struct Told {
  std::vector<RoundDecision> rounds;
  std::vector<std::pair<int, RoundEnd>> ends;
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  int events() const { return static_cast<int>(rounds.size() + ends.size() + errors.size() + warnings.size()); }
};

std::size_t thread_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) ++count;
  return count;
}

class Membership : public ::testing::Test {
 protected:
  /// With a fast keep-alive, so that a silent node is lost within a second or so.
  RendezvousSettings static_job(int nnodes) const {
    RendezvousSettings settings = ddprun::testing::static_job(nnodes);
    settings.timeout = 30s;
    settings.keep_alive_interval = 100ms;
    settings.heartbeat_timeout = 2s;
    settings.read_timeout = 10s;
    return settings;
  }

  /// A node whose agent answers probes (a listening socket on this loop) unless `probe_port` is given.
  NodeInfo node(const std::string& id, int static_rank, int probe_port = 0) {
    NodeInfo info = ddprun::testing::node(id, 1, static_rank);
    if (probe_port == 0) {
      probes_.push_back(std::make_unique<tcp::acceptor>(io_, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)));
      probe_port = probes_.back()->local_endpoint().port();
    }
    info.probe_port = probe_port;
    return info;
  }

  std::unique_ptr<NodeMembership> start(const RendezvousSettings& settings, const NodeInfo& self, Told& told) {
    NodeMembership::Events events;
    events.on_round = [&told](RoundDecision decision) { told.rounds.push_back(std::move(decision)); };
    events.on_round_end = [&told](int round, RoundEnd end) { told.ends.emplace_back(round, std::move(end)); };
    events.on_error = [&told](std::string message, bool) { told.errors.push_back(std::move(message)); };
    events.on_warning = [&told](std::string line) { told.warnings.push_back(std::move(line)); };
    return std::make_unique<NodeMembership>(io_, settings, Endpoint{"127.0.0.1", server_->port()}, std::nullopt,
                                            self, std::move(events));
  }

  /// Runs the loop until `done` holds, at most `bound`; returns whether it held.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds bound = 20s) {
    return ddprun::testing::run_until(io_, done, bound);
  }

  /// Two nodes of a static job that formed their round and watch it.
  void form_round(std::unique_ptr<NodeMembership>& a, Told& told_a, std::unique_ptr<NodeMembership>& b, Told& told_b,
                  int b_probe_port = 0) {
    a = start(static_job(2), node("a", 0), told_a);
    b = start(static_job(2), node("b", 1, b_probe_port), told_b);
    a->join(0, -1);
    b->join(0, -1);
    ASSERT_TRUE(run_until([&] { return !told_a.rounds.empty() && !told_b.rounds.empty(); }))
        << (told_a.errors.empty() ? "" : told_a.errors.front());
    a->watch(told_a.rounds.front());
    b->watch(told_b.rounds.front());
  }

  boost::asio::io_context io_;
  std::vector<std::unique_ptr<tcp::acceptor>> probes_;
  std::unique_ptr<StoreServer> server_ = ddprun::testing::start_loopback_store();
};

TEST_F(Membership, TwoNodesFormARoundAndFinishItOnTheLoopAlone) {
  const std::size_t threads = thread_count();  // this one and the store server's
  Told told_a, told_b;
  std::unique_ptr<NodeMembership> a, b;
  form_round(a, told_a, b, told_b);
  EXPECT_EQ(thread_count(), threads) << "a membership started a thread";
  EXPECT_EQ(encode_decision(told_a.rounds.front()), encode_decision(told_b.rounds.front()));
  a->mark_finished();
  run_until([&] { return false; }, 500ms);  // heartbeats go on; a waits for b
  EXPECT_TRUE(told_a.ends.empty()) << "the round ended before b finished";
  b->mark_finished();
  ASSERT_TRUE(run_until([&] { return !told_a.ends.empty() && !told_b.ends.empty(); }));
  EXPECT_EQ(told_a.ends.front().second.kind, EndKind::finished);
  EXPECT_EQ(told_b.ends.front().second.message, "the last node to finish was host-b (127.0.0.1)");
  EXPECT_TRUE(told_a.errors.empty() && told_b.errors.empty());
  EXPECT_EQ(thread_count(), threads);
}

TEST_F(Membership, ANodeWhoseHeartbeatStopsIsDropped) {
  Told told_a, told_b;
  std::unique_ptr<NodeMembership> a, b;
  form_round(a, told_a, b, told_b);
  b.reset();  // b's agent froze: nothing of it runs any more
  ASSERT_TRUE(run_until([&] { return !told_a.ends.empty(); }));
  EXPECT_EQ(told_a.ends.front().second.kind, EndKind::lost);
  EXPECT_EQ(told_a.ends.front().second.message, "node host-b (127.0.0.1) stopped heart-beating (nothing for 300 ms)");
  EXPECT_EQ(told_b.events(), 1) << "b's events: its round, and nothing after its destruction";
}

TEST_F(Membership, AFailureIsReportedAsSuchWhileEveryPeerAnswers) {
  Told told_a, told_b;
  std::unique_ptr<NodeMembership> a, b;
  form_round(a, told_a, b, told_b);
  a->report_failure(RoundEnd{EndKind::failure, "a", "rank 0 failed"});
  ASSERT_TRUE(run_until([&] { return !told_a.ends.empty() && !told_b.ends.empty(); }));
  EXPECT_EQ(told_b.ends.front().second, (RoundEnd{EndKind::failure, "a", "rank 0 failed"}));
}

TEST_F(Membership, AFailureWithAPeerGoneIsThePeersLoss) {
  Told told_a, told_b;
  std::unique_ptr<NodeMembership> a, b;
  form_round(a, told_a, b, told_b, ddprun::testing::free_port());  // b's agent does not answer probes
  a->report_failure(RoundEnd{EndKind::failure, "a", "rank 0 failed"});
  ASSERT_TRUE(run_until([&] { return !told_a.ends.empty(); }));
  EXPECT_EQ(told_a.ends.front().second,
            (RoundEnd{EndKind::lost, "b", "node host-b (127.0.0.1) is gone: its agent does not answer"}));
}

TEST_F(Membership, EndRoundTellsTheCallerWhenTheStoreAnswered) {
  Told told_a, told_b;
  std::unique_ptr<NodeMembership> a, b;
  form_round(a, told_a, b, told_b);
  bool done = false;
  a->end_round(RoundEnd{EndKind::left, "a", "node host-a (127.0.0.1) left (SIGTERM)"}, [&] { done = true; });
  ASSERT_TRUE(run_until([&] { return done && !told_b.ends.empty(); }));
  EXPECT_EQ(told_b.ends.front().second.kind, EndKind::left);
}

TEST_F(Membership, ALostStoreIsAnError) {
  Told told_a, told_b;
  std::unique_ptr<NodeMembership> a, b;
  form_round(a, told_a, b, told_b);
  const int port = server_->port();
  server_->stop();
  ASSERT_TRUE(run_until([&] { return !told_a.errors.empty(); }, 30s));
  EXPECT_EQ(told_a.errors.front().rfind("lost the rendezvous store at 127.0.0.1:" + std::to_string(port), 0), 0U)
      << told_a.errors.front();
  EXPECT_EQ(told_a.errors.size(), 1U) << "told once";
}

TEST_F(Membership, DestroyedWhileJoiningItCallsNoEventAndLeavesNothingOnTheLoop) {
  Told told;
  auto alone = start(static_job(2), node("a", 0), told);  // waits for node 1, which never comes
  alone->join(0, -1);
  run_until([&] { return false; }, 300ms);
  alone.reset();
  probes_.clear();
  // What the membership left on the loop winds down at once: the loop runs out of work.
  io_.restart();
  const auto start_time = std::chrono::steady_clock::now();
  io_.run_for(5s);
  EXPECT_TRUE(io_.stopped()) << "the loop still had work";
  EXPECT_LT(std::chrono::steady_clock::now() - start_time, 4s);
  EXPECT_EQ(told.events(), 0);
}

}  // namespace

/// RoundProtocol on every store an agent's rendezvous runs on (tests/support/store_backends.hpp:
/// the c10d store on loopback, and a real etcd over HTTP and over TLS): several nodes, each a
/// thread with its own io_context and connection, as agents on several machines would be; each
/// thread runs the protocol's coroutines to completion. The same rules without a store, with time
/// driven by the test: tests/unit/round_protocol_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "rendezvous/round_keys.hpp"
#include "rendezvous/round_protocol.hpp"
#include "tests/support/round_fixtures.hpp"
#include "tests/support/store_backends.hpp"

using namespace ddprun::rendezvous;
using ddprun::testing::dynamic_job;
using ddprun::testing::ids_of;
using ddprun::testing::node;
using ddprun::testing::static_job;
using ddprun::testing::StoreBackendTest;
using ddprun::testing::rendezvous_error_of;
using namespace std::chrono_literals;

namespace {

class RoundProtocolTest : public StoreBackendTest {};

TEST_P(RoundProtocolTest, StaticRanksFollowNodeRankWhateverTheJoinOrder) {
  RendezvousSettings settings = static_job(3);
  auto decisions = join_all(settings, {node("c", 2, 2), node("a", 1, 0), node("b", 3, 1)});
  for (const auto& decision : decisions) {
    EXPECT_EQ(encode_decision(decision), encode_decision(decisions.front()));
    EXPECT_EQ(ids_of(decision), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(decision.world_size(), 6);
    EXPECT_EQ(decision.rank_base(2), 4);
    EXPECT_EQ(decision.restart_count, 0);
  }
}

TEST_P(RoundProtocolTest, ASecondNodeWithATakenStaticRankIsTurnedAwayAtOnceAndTheRoundFormsWithoutIt) {
  RendezvousSettings settings = static_job(2);
  auto holder = std::async(std::launch::async, [&] {
    auto a = connection();
    return a->run(RoundProtocol(a->store(), settings).join(node("a", 1, 1)));
  });
  auto b = connection();
  RoundProtocol protocol(b->store(), settings);
  wait_for(protocol.keys().join_slot(0, 0));  // a holds rank 1 and waits in round 0
  std::string refused = rendezvous_error_of([&] { b->run(protocol.join(node("b", 1, 1))); });
  EXPECT_EQ(refused,
            "node rank 1 is taken by host-a (127.0.0.1), which joined round 0 of job 'job' first: give each node of "
            "the job its own --node-rank");
  // The job goes on: the node that was missing forms the round with the holder.
  auto decisions = join_all(settings, {node("c", 1, 0)});
  EXPECT_EQ(ids_of(decisions.front()), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(ids_of(holder.get()), (std::vector<std::string>{"c", "a"}));
}

TEST_P(RoundProtocolTest, ASecondNodeWithAStaticRankInARunningRoundIsTurnedAwayWhileItsHolderBeats) {
  RendezvousSettings settings = static_job(2);
  settings.keep_alive_interval = 100ms;
  auto first = join_all(settings, {node("a", 1, 0), node("b", 1, 1)}).front();
  // b's keep-alive, as its agent runs it.
  std::atomic<bool> beating{true};
  auto keep_alive = std::async(std::launch::async, [&] {
    auto b = connection();
    RoundProtocol protocol(b->store(), settings);
    for (std::int64_t counter = 1; beating; ++counter) {
      b->run(protocol.beat("b", counter));
      std::this_thread::sleep_for(settings.keep_alive_interval / 2);
    }
  });
  auto b2 = connection();
  std::string refused =
      rendezvous_error_of([&] { b2->run(RoundProtocol(b2->store(), settings).join(node("b2", 1, 1))); });
  beating = false;
  keep_alive.get();
  EXPECT_EQ(refused,
            "node rank 1 is taken by host-b (127.0.0.1), which runs in round 0 of job 'job' and is alive (its "
            "heartbeat goes on): give each node of the job its own --node-rank");
  EXPECT_FALSE(exists(RoundKeys(settings.run_id).end(first.round))) << "the round runs on";
}

TEST_P(RoundProtocolTest, AStaticNodeReplacingASilentOneWaitsForTheRoundToEndAndTakesItsPlace) {
  RendezvousSettings settings = static_job(2);
  settings.keep_alive_interval = 100ms;
  auto first = join_all(settings, {node("a", 1, 0), node("b", 1, 1)}).front();
  // b died without a word: its heartbeat stays put. Its replacement waits for the round to end.
  auto replacement = std::async(std::launch::async, [&] {
    auto b2 = connection();
    return b2->run(RoundProtocol(b2->store(), settings).join(node("b2", 1, 1)));
  });
  EXPECT_EQ(replacement.wait_for(5 * settings.keep_alive_interval), std::future_status::timeout)
      << "the replacement of a silent node was turned away, or joined a running round";
  auto a = connection();
  a->run(RoundProtocol(a->store(), settings).end_round(first.round, RoundEnd{EndKind::lost, "b", "b stopped heart-beating"}));
  auto second = join_all(settings, {node("a", 1, 0)}).front();
  EXPECT_EQ(ids_of(second), (std::vector<std::string>{"a", "b2"}));
  EXPECT_EQ(ids_of(replacement.get()), (std::vector<std::string>{"a", "b2"}));
}

TEST_P(RoundProtocolTest, AStaticNodeOfAnotherShapeFailsTheNodesWaitingForItWhoeverCameFirst) {
  // The node that records the shape fixes it: the message names it and the disagreeing node, both
  // values, and reaches the nodes that already wait in the round.
  int job = 0;
  for (const auto& c : ddprun::testing::static_shape_conflicts()) {
    SCOPED_TRACE(c.what);
    RendezvousSettings first = static_job(c.first_nnodes);
    first.run_id = "shape" + std::to_string(job++);
    RendezvousSettings second = static_job(c.second_nnodes);
    second.run_id = first.run_id;
    auto waiting = std::async(std::launch::async, [&] {
      auto a = connection();
      RoundProtocol protocol(a->store(), first);
      a->run(protocol.check_job(node("a", 1, 0)));
      return rendezvous_error_of([&] { a->run(protocol.join(node("a", 1, 0))); });
    });
      auto b = connection();
    RoundProtocol protocol(b->store(), second);
    wait_for(protocol.keys().join_slot(0, 0));  // a waits in round 0
    EXPECT_EQ(rendezvous_error_of([&] { b->run(protocol.check_job(node("b", 1, 1))); }), c.expected);
    EXPECT_EQ(waiting.get(), c.expected);
    // A node that agrees with the job and comes later reads the same.
    EXPECT_EQ(rendezvous_error_of([&] {
                RoundProtocol late(b->store(), first);
                b->run(late.check_job(node("c", 1, 1)));
                b->run(late.join(node("c", 1, 1)));
              }),
              c.expected);
  }
}

TEST_P(RoundProtocolTest, FullRoundClosesAtOnceAndPartialRoundAfterTheLastCall) {
  auto full = join_all(dynamic_job(2, 3), {node("a"), node("b"), node("c")});
  EXPECT_EQ(full.front().nodes.size(), 3U);

  RendezvousSettings settings = dynamic_job(2, 3);
  settings.run_id = "partial";
  auto start = std::chrono::steady_clock::now();
  auto partial = join_all(settings, {node("a"), node("b")});
  EXPECT_GE(std::chrono::steady_clock::now() - start, settings.last_call_timeout);
  EXPECT_EQ(partial.front().nodes.size(), 2U);
  EXPECT_EQ(encode_decision(partial[0]), encode_decision(partial[1]));
}

TEST_P(RoundProtocolTest, AfterALostNodeTheSurvivorsFormTheNextRoundWithoutTheLastCall) {
  RendezvousSettings settings = dynamic_job(2, 3);
  auto first = join_all(settings, {node("a"), node("b"), node("c")}).front();
  const NodeInfo& lost = first.nodes.at(1);
  auto node = connection();
  RoundProtocol protocol(node->store(), settings);
  node->run(protocol.end_round(first.round, RoundEnd{EndKind::lost, lost.id, "lost"}));

  settings.last_call_timeout = 60s;  // the survivors must not wait for it
  std::vector<NodeInfo> survivors;
  for (const auto& n : first.nodes) {
    if (n.id == lost.id) continue;
    NodeInfo again = n;
    again.previous_rank = first.group_rank_of(n.id);
    survivors.push_back(again);
  }
  auto start = std::chrono::steady_clock::now();
  auto second = join_all(settings, survivors);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(second.front().round, first.round + 1);
  EXPECT_EQ(second.front().nodes.size(), 2U);
  EXPECT_EQ(second.front().restart_count, 0) << "a lost node uses no restart";
  // The survivor of rank 0 keeps it; the one of rank 2 takes the free rank 1.
  EXPECT_EQ(second.front().nodes.at(0).id, first.nodes.at(0).id);
  EXPECT_EQ(second.front().nodes.at(1).id, first.nodes.at(2).id);
}

TEST_P(RoundProtocolTest, AFailureCountsARestartForTheNextRound) {
  RendezvousSettings settings = dynamic_job(2, 2);
  auto first = join_all(settings, {node("a"), node("b")}).front();
  auto a = connection();
  a->run(RoundProtocol(a->store(), settings).end_round(first.round, RoundEnd{EndKind::failure, "a", "rank 0 failed"}));
  auto second = join_all(settings, {node("a"), node("b")}).front();
  EXPECT_EQ(second.round, 1);
  EXPECT_EQ(second.restart_count, 1);
}

TEST_P(RoundProtocolTest, ANodeArrivingDuringARoundEndsItAndTheNextRoundIncludesIt) {
  RendezvousSettings settings = dynamic_job(2, 3);
  auto first = join_all(settings, {node("a"), node("b")}).front();
  ASSERT_EQ(first.nodes.size(), 2U);

  auto late = std::async(std::launch::async, [&] {
    auto c = connection();
    return c->run(RoundProtocol(c->store(), settings).join(node("c")));
  });
  auto a = connection();
  RoundProtocol watcher(a->store(), settings);
  RoundEnd end = a->run(watcher.wait_end(first.round, 20s));
  EXPECT_EQ(end.kind, EndKind::joined);
  EXPECT_EQ(end.node, "c");
  // a and b rejoin, as their agents do when they see the end.
  auto second = join_all(settings, {node("a"), node("b")});
  RoundDecision with_late = late.get();
  EXPECT_EQ(with_late.nodes.size(), 3U);
  EXPECT_EQ(encode_decision(with_late), encode_decision(second.front()));
  EXPECT_EQ(with_late.restart_count, 0) << "scaling up uses no restart";
}

TEST_P(RoundProtocolTest, WhenEveryNodeFinishedTheJobIsClosedToLateNodes) {
  RendezvousSettings settings = dynamic_job(2, 3);
  auto decisions = join_all(settings, {node("a"), node("b")});
  auto a = connection();
  RoundProtocol protocol(a->store(), settings);
  a->run(protocol.mark_finished(decisions.front(), node("a")));
  EXPECT_FALSE(exists(protocol.keys().end(decisions.front().round))) << "b has not finished yet";
  a->run(protocol.mark_finished(decisions.front(), node("b")));
  EXPECT_EQ(a->run(protocol.wait_end(decisions.front().round, 5s)).kind, EndKind::finished);

  try {
    a->run(protocol.join(node("late")));
    FAIL() << "a late node joined a finished job";
  } catch (const RendezvousClosed& error) {
    EXPECT_NE(std::string(error.what()).find("already finished"), std::string::npos) << error.what();
  }
}

TEST_P(RoundProtocolTest, JoinTimeoutNamesWhoJoinedAndWhatIsMissing) {
  RendezvousSettings settings = dynamic_job(3, 3);
  settings.join_timeout = 500ms;
  auto alone = connection();
  RoundProtocol protocol(alone->store(), settings);
  try {
    alone->run(protocol.join(node("alone")));
    FAIL() << "a round of one formed with MIN 3";
  } catch (const RendezvousError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("did not form within 500 ms"), std::string::npos) << message;
    EXPECT_NE(message.find("host-alone (127.0.0.1)"), std::string::npos) << message;
    EXPECT_NE(message.find("2 more node(s)"), std::string::npos) << message;
  }
}

TEST_P(RoundProtocolTest, ANodeOfAnotherShapeOrAnotherJobIsTurnedAway) {
  auto n = connection();
  // Each check on a protocol of its own, as each node has; the protocol lives until its check ends.
  auto check = [&](const RendezvousSettings& settings, const NodeInfo& self) {
    RoundProtocol protocol(n->store(), settings);
    n->run(protocol.check_job(self));
  };
  check(dynamic_job(2, 4), node("a"));
  check(dynamic_job(2, 4), node("b"));
  EXPECT_EQ(rendezvous_error_of([&] { check(dynamic_job(2, 3), node("c")); }),
            "node host-c (127.0.0.1) says --nnodes=2:3, but this job was started with --nnodes=2:4 by node host-a "
            "(127.0.0.1): start every node of a job with the same --nnodes");
  RendezvousSettings restarts = dynamic_job(2, 4);
  restarts.max_restarts = 3;
  EXPECT_EQ(rendezvous_error_of([&] { check(restarts, node("d")); }),
            "node host-d (127.0.0.1) says --max-restarts=3, but this job was started with --max-restarts=0 by node "
            "host-a (127.0.0.1): start every node of a job with the same --max-restarts");

  set(kHostedRunIdKey, "other");
  try {
    check(dynamic_job(2, 4), node("a"));
    FAIL() << "joined the store of job 'other'";
  } catch (const RendezvousError& error) {
    EXPECT_NE(std::string(error.what()).find("'other', not 'job'"), std::string::npos) << error.what();
  }
}

TEST_P(RoundProtocolTest, AnElasticNodeOfAnotherShapeLeavesTheRoundToTheOthers) {
  // Elastic rounds (c10d, etcd-v3) can form without it: only the disagreeing node fails.
  RendezvousSettings settings = dynamic_job(2, 2);
  auto n = connection();
  {
    RoundProtocol a(n->store(), settings);
    n->run(a.check_job(node("a")));
  }
  EXPECT_NE(rendezvous_error_of([&] {
              RoundProtocol x(n->store(), dynamic_job(2, 3));
              n->run(x.check_job(node("x")));
            }),
            "");
  auto decisions = join_all(settings, {node("a"), node("b")});
  EXPECT_EQ(decisions.front().nodes.size(), 2U);
}

TEST_P(RoundProtocolTest, HeartbeatsAreCountersAndAMissingOneReadsAsMinusOne) {
  auto n = connection();
  RoundProtocol protocol(n->store(), dynamic_job(1, 1));
  n->run(protocol.beat("a", 7));
  set(protocol.keys().heartbeat("b"), "not a number");
  // read_beats WAITs for the keys (join() creates them); give "c" one so the read ends.
  set(protocol.keys().heartbeat("c"), "");
  EXPECT_EQ(n->run(protocol.read_beats({"a", "b", "c"})), (std::vector<std::int64_t>{7, -1, -1}));
}

INSTANTIATE_TEST_SUITE_P(Stores, RoundProtocolTest, ddprun::testing::all_backends(), ddprun::testing::backend_name);

}  // namespace

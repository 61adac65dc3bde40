// RoundProtocol over an InProcessStore with manual time: several nodes, each a coroutine on one
// io_context, form static and c10d rounds; every deadline (last call, closer grace, join timeout,
// keep-alive) is driven by moving the store's clock, never by sleeping. What it takes a real server
// to show stays in tests/integration/round_protocol_test.cpp.
#include "rendezvous/round_protocol.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <deque>

#include "rendezvous/in_process_store.hpp"
#include "rendezvous/round_close_rule.hpp"
#include "rendezvous/store_error.hpp"
#include "tests/support/round_fixtures.hpp"
#include "tests/support/spawn_task.hpp"

using namespace ddprun::rendezvous;
using ddprun::testing::dynamic_job;
using ddprun::testing::ids_of;
using ddprun::testing::kJoinTimeout;
using ddprun::testing::kLastCall;
using ddprun::testing::node;
using ddprun::testing::spawn;
using ddprun::testing::Spawned;
using ddprun::testing::static_job;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

namespace {

Task<RoundDecision> check_and_join(RoundProtocol& protocol, NodeInfo self) {
  co_await protocol.check_job(self);
  co_return co_await protocol.join(self);
}

/// A node's keep-alive: beats every `interval` (by the store's clock) while `beating`.
Task<void> keep_beating(RoundProtocol& protocol, Store& store, std::string id, milliseconds interval, const bool& beating) {
  for (std::int64_t counter = 1; beating; ++counter) {
    co_await protocol.beat(id, counter);
    try {
      co_await store.wait(std::vector<std::string>(1, "never"), interval);
    } catch (const StoreTimeout&) {
    }
  }
}

class Rounds : public ::testing::Test {
 protected:
  /// A protocol of its own for each node, as each agent has; they live as long as the test.
  RoundProtocol& protocol(const RendezvousSettings& settings) {
    return protocols_.emplace_back(store_, settings, store_.clock());
  }

  using Joining = std::shared_ptr<Spawned<RoundDecision>>;
  /// Each node checks the job and joins, in this order, each a coroutine of its own.
  std::vector<Joining> start_joins(const RendezvousSettings& settings, const std::vector<NodeInfo>& nodes) {
    std::vector<Joining> joins;
    for (const auto& n : nodes) joins.push_back(spawn(io_, check_and_join(protocol(settings), n)));
    return joins;
  }
  static bool all_done(const std::vector<Joining>& joins) {
    return std::all_of(joins.begin(), joins.end(), [](const Joining& j) { return j->done; });
  }
  /// start_joins, then runs until every node has its decision (or nothing can move).
  std::vector<RoundDecision> join_all(const RendezvousSettings& settings, const std::vector<NodeInfo>& nodes) {
    auto joins = start_joins(settings, nodes);
    run_until([&] { return all_done(joins); });
    std::vector<RoundDecision> decisions;
    for (auto& join : joins) {
      EXPECT_TRUE(join->done) << "a node is still joining";
      if (!join->done) continue;
      EXPECT_EQ(join->error_message(), "");
      if (!join->error) decisions.push_back(join->get());
    }
    return decisions;
  }

  /// Runs the coroutines as far as they go without time passing.
  void settle() {
    io_.restart();
    io_.poll();
  }
  /// Settles; then, while `done` is false, moves the clock to the next deadline of a wait and
  /// settles again. Stops when nothing waits with a deadline.
  template <class Done>
  void run_until(Done done) {
    for (settle(); !done(); settle()) {
      if (!store_.advance_to_next_deadline()) return;
    }
  }
  /// Runs for `span` of the store's time: every deadline within it comes.
  void run_for(milliseconds span) {
    const SteadyTime end = now() + span;
    for (settle();; settle()) {
      auto next = store_.next_deadline();
      if (!next || *next > end) break;
      store_.advance_to_next_deadline();
    }
    if (now() < end) store_.advance(std::chrono::ceil<milliseconds>(end - now()));
    settle();
  }

  SteadyTime now() const { return store_.clock()(); }
  milliseconds elapsed() const { return std::chrono::duration_cast<milliseconds>(now() - t0_); }

  boost::asio::io_context io_;
  InProcessStore store_{io_.get_executor(), InProcessStore::Time::manual};
  const SteadyTime t0_ = store_.clock()();
  std::deque<RoundProtocol> protocols_;
};

TEST_F(Rounds, StaticRanksFollowNodeRankWhateverTheJoinOrderAndTheFullRoundClosesAtOnce) {
  const std::vector<std::vector<NodeInfo>> orders = {
      {node("c", 2, 2), node("a", 1, 0), node("b", 3, 1)},
      {node("a", 1, 0), node("b", 3, 1), node("c", 2, 2)},
      {node("b", 3, 1), node("c", 2, 2), node("a", 1, 0)},
  };
  int job = 0;
  for (const auto& order : orders) {
    RendezvousSettings settings = static_job(3);
    settings.run_id = "order" + std::to_string(job++);
    const SteadyTime start = now();
    auto decisions = join_all(settings, order);
    ASSERT_EQ(decisions.size(), 3U);
    EXPECT_EQ(now(), start) << "a full round waits for nothing";
    for (const auto& decision : decisions) {
      EXPECT_EQ(encode_decision(decision), encode_decision(decisions.front()));
      EXPECT_EQ(ids_of(decision), (std::vector<std::string>{"a", "b", "c"}));
      EXPECT_EQ(decision.world_size(), 6);
      EXPECT_EQ(decision.rank_base(2), 4);
      EXPECT_EQ(decision.restart_count, 0);
    }
  }
}

TEST_F(Rounds, C10dRoundsCloseWhenFullOrAfterTheLastCall) {
  struct Case {
    const char* what;
    int min, max, nodes;
    milliseconds took;  ///< of the store's clock, from the first join to the last decision
  } cases[] = {
      {"full: at once", 2, 3, 3, 0ms},
      {"MIN == MAX: at once", 2, 2, 2, 0ms},
      {"MIN of MAX: the last call", 2, 3, 2, kLastCall},
      {"one of up to four: the last call", 1, 4, 1, kLastCall},
      {"three of up to four: the last call", 2, 4, 3, kLastCall},
  };
  int job = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    RendezvousSettings settings = dynamic_job(c.min, c.max);
    settings.run_id = "c10d" + std::to_string(job++);
    std::vector<NodeInfo> nodes;
    for (int i = 0; i < c.nodes; ++i) nodes.push_back(node(std::string(1, static_cast<char>('a' + i))));
    const SteadyTime start = now();
    auto decisions = join_all(settings, nodes);
    ASSERT_EQ(decisions.size(), static_cast<std::size_t>(c.nodes));
    EXPECT_EQ(now() - start, c.took);
    EXPECT_EQ(decisions.front().nodes.size(), static_cast<std::size_t>(c.nodes));
    for (const auto& decision : decisions) EXPECT_EQ(encode_decision(decision), encode_decision(decisions.front()));
  }
}

TEST_F(Rounds, JoinTimeoutNamesWhoJoinedAndWhatIsMissing) {
  RendezvousSettings three = dynamic_job(3, 3);
  RendezvousSettings static_three = static_job(3);
  static_three.run_id = "static";
  struct Case {
    const char* what;
    RendezvousSettings settings;
    std::vector<NodeInfo> nodes;
    std::string message;
  } cases[] = {
      {"c10d, one of MIN 3", three, {node("alone")},
       "round 0 of job 'job' did not form within 20 s: joined: host-alone (127.0.0.1); waiting for 2 more node(s) "
       "(--nnodes=3:3)"},
      {"static, ranks 0 and 2 of 3", static_three, {node("a", 1, 0), node("c", 1, 2)},
       "round 0 of job 'static' did not form within 20 s: joined: host-a (127.0.0.1), host-c (127.0.0.1); waiting "
       "for node rank(s) 1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const SteadyTime start = now();
    auto joins = start_joins(c.settings, c.nodes);
    run_until([&] { return all_done(joins); });
    for (auto& join : joins) {
      ASSERT_TRUE(join->done);
      EXPECT_EQ(join->error_message(), c.message);
    }
    EXPECT_EQ(now() - start, kJoinTimeout) << "not a moment earlier";
  }
}

TEST_F(Rounds, ANodeArrivingDuringARoundWithRoomEndsItAndTheNextRoundIncludesIt) {
  RendezvousSettings settings = dynamic_job(2, 3);
  auto first = join_all(settings, {node("a"), node("b")}).front();
  ASSERT_EQ(first.nodes.size(), 2U);

  auto late = spawn(io_, protocol(settings).join(node("c")));
  auto end = spawn(io_, protocol(settings).wait_end(first.round, 20s));
  settle();
  ASSERT_TRUE(end->done) << "the late node ended the round at once";
  EXPECT_EQ(end->get().kind, EndKind::joined);
  EXPECT_EQ(end->get().node, "c");
  EXPECT_FALSE(late->done) << "it joins the next round";
  // a and b rejoin, as their agents do when they see the end: c is expected back, no last call.
  const SteadyTime start = now();
  auto second = join_all(settings, {node("a"), node("b")});
  run_until([&] { return late->done; });
  ASSERT_TRUE(late->done);
  RoundDecision with_late = late->get();
  EXPECT_EQ(now(), start);
  EXPECT_EQ(with_late.nodes.size(), 3U);
  EXPECT_EQ(encode_decision(with_late), encode_decision(second.front()));
  EXPECT_EQ(with_late.restart_count, 0) << "scaling up uses no restart";
}

TEST_F(Rounds, ALateNodeWaitsForAFullRoundToEndAndJoinsTheNext) {
  RendezvousSettings settings = dynamic_job(2, 2);
  auto first = join_all(settings, {node("a"), node("b")}).front();
  auto late = spawn(io_, protocol(settings).join(node("c")));
  run_for(10s);
  EXPECT_FALSE(late->done) << "a full round has no room: the late node waits for its end";
  auto end = spawn(io_, protocol(settings).end_round(first.round, RoundEnd{EndKind::lost, "b", "b stopped heart-beating"}));
  NodeInfo a = node("a");
  a.previous_rank = 0;  // a keeps its rank; c, new, takes the next
  auto second = join_all(settings, {a});
  ASSERT_TRUE(late->done);
  EXPECT_EQ(ids_of(late->get()), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(ids_of(second.front()), (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(end->done);
}

TEST_F(Rounds, ALateNodeGivesUpWhenTheFullRoundRunsForItsWholeJoinDeadline) {
  RendezvousSettings settings = dynamic_job(2, 2);
  join_all(settings, {node("a"), node("b")});
  const SteadyTime start = now();
  auto late = spawn(io_, protocol(settings).join(node("c")));
  run_until([&] { return late->done; });
  ASSERT_TRUE(late->done);
  EXPECT_EQ(late->error_message(),
            "round 0 of job 'job' has all 2 nodes it can take and ran for the whole 20 s this node waited for a place");
  EXPECT_EQ(now() - start, kJoinTimeout);
}

TEST_F(Rounds, ASecondNodeWithATakenStaticRankIsTurnedAwayAtOnceAndTheRoundFormsWithoutIt) {
  RendezvousSettings settings = static_job(2);
  auto holder = spawn(io_, protocol(settings).join(node("a", 1, 1)));
  settle();  // a holds rank 1 and waits in round 0
  auto second = spawn(io_, protocol(settings).join(node("b", 1, 1)));
  settle();
  ASSERT_TRUE(second->done) << "turned away at once";
  EXPECT_EQ(second->error_message(),
            "node rank 1 is taken by host-a (127.0.0.1), which joined round 0 of job 'job' first: give each node of "
            "the job its own --node-rank");
  auto decisions = join_all(settings, {node("c", 1, 0)});
  ASSERT_TRUE(holder->done);
  EXPECT_EQ(ids_of(decisions.front()), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(ids_of(holder->get()), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(elapsed(), 0ms);
}

TEST_F(Rounds, ASecondNodeWithAStaticRankInARunningRoundIsTurnedAwayWhileItsHolderBeats) {
  RendezvousSettings settings = static_job(2);
  settings.keep_alive_interval = 100ms;
  auto first = join_all(settings, {node("a", 1, 0), node("b", 1, 1)}).front();
  bool beating = true;
  auto keep_alive = spawn(io_, keep_beating(protocol(settings), store_, "b", settings.keep_alive_interval / 2, beating));
  const SteadyTime start = now();
  auto duplicate = spawn(io_, protocol(settings).join(node("b2", 1, 1)));
  run_until([&] { return duplicate->done; });
  const auto took = now() - start;
  beating = false;
  run_until([&] { return keep_alive->done; });
  ASSERT_TRUE(duplicate->done);
  EXPECT_EQ(duplicate->error_message(),
            "node rank 1 is taken by host-b (127.0.0.1), which runs in round 0 of job 'job' and is alive (its "
            "heartbeat goes on): give each node of the job its own --node-rank");
  EXPECT_EQ(took, settings.keep_alive_interval) << "one look at the holder's heartbeat";
  auto ended = spawn(io_, store_.check({protocol(settings).keys().end(first.round)}));
  settle();
  EXPECT_FALSE(ended->get()) << "the round runs on";
}

TEST_F(Rounds, AStaticNodeReplacingASilentOneWaitsForTheRoundToEndAndTakesItsPlace) {
  RendezvousSettings settings = static_job(2);
  settings.keep_alive_interval = 100ms;
  auto first = join_all(settings, {node("a", 1, 0), node("b", 1, 1)}).front();
  auto replacement = spawn(io_, protocol(settings).join(node("b2", 1, 1)));
  run_for(5 * settings.keep_alive_interval);
  EXPECT_FALSE(replacement->done) << "the replacement of a silent node was turned away, or joined a running round";
  spawn(io_, protocol(settings).end_round(first.round, RoundEnd{EndKind::lost, "b", "b stopped heart-beating"}));
  auto second = join_all(settings, {node("a", 1, 0)});
  ASSERT_TRUE(replacement->done);
  EXPECT_EQ(ids_of(second.front()), (std::vector<std::string>{"a", "b2"}));
  EXPECT_EQ(ids_of(replacement->get()), (std::vector<std::string>{"a", "b2"}));
}

TEST_F(Rounds, AStaticNodeOfAnotherShapeFailsTheNodesWaitingForItWhoeverCameFirst) {
  int job = 0;
  for (const auto& c : ddprun::testing::static_shape_conflicts()) {
    SCOPED_TRACE(c.what);
    RendezvousSettings first = static_job(c.first_nnodes);
    first.run_id = "shape" + std::to_string(job++);
    RendezvousSettings second = static_job(c.second_nnodes);
    second.run_id = first.run_id;
    auto waiting = spawn(io_, check_and_join(protocol(first), node("a", 1, 0)));
    settle();  // a waits in round 0
    ASSERT_FALSE(waiting->done);
    auto disagreeing = spawn(io_, protocol(second).check_job(node("b", 1, 1)));
    settle();
    ASSERT_TRUE(disagreeing->done);
    ASSERT_TRUE(waiting->done) << "woken by the failed round, not by its deadline";
    EXPECT_EQ(disagreeing->error_message(), c.expected);
    EXPECT_EQ(waiting->error_message(), c.expected);
    EXPECT_THROW(waiting->get(), RoundFailed);
    // A node that agrees with the job and comes later reads the same.
    auto late = spawn(io_, check_and_join(protocol(first), node("c", 1, 1)));
    settle();
    ASSERT_TRUE(late->done);
    EXPECT_EQ(late->error_message(), c.expected);
  }
  EXPECT_EQ(elapsed(), 0ms);
}

TEST_F(Rounds, ANodeOfAnotherShapeOrAnotherJobIsTurnedAway) {
  auto check = [&](const RendezvousSettings& settings, const NodeInfo& self) {
    auto checked = spawn(io_, protocol(settings).check_job(self));
    settle();
    EXPECT_TRUE(checked->done);
    return checked->error_message();
  };
  EXPECT_EQ(check(dynamic_job(2, 4), node("a")), "");
  EXPECT_EQ(check(dynamic_job(2, 4), node("b")), "");
  EXPECT_EQ(check(dynamic_job(2, 3), node("c")),
            "node host-c (127.0.0.1) says --nnodes=2:3, but this job was started with --nnodes=2:4 by node host-a "
            "(127.0.0.1): start every node of a job with the same --nnodes");
  RendezvousSettings restarts = dynamic_job(2, 4);
  restarts.max_restarts = 3;
  EXPECT_EQ(check(restarts, node("d")),
            "node host-d (127.0.0.1) says --max-restarts=3, but this job was started with --max-restarts=0 by node "
            "host-a (127.0.0.1): start every node of a job with the same --max-restarts");
  spawn(io_, store_.set(kHostedRunIdKey, "other"));
  settle();
  EXPECT_EQ(check(dynamic_job(2, 4), node("a")),
            "the store at in-process serves job 'other', not 'job' (--rdzv-id): start every node of a job with the "
            "same --rdzv-id, and different jobs on different endpoints");
}

TEST_F(Rounds, AC10dNodeOfAnotherShapeLeavesTheRoundToTheOthers) {
  auto checked = spawn(io_, protocol(dynamic_job(2, 2)).check_job(node("a")));
  auto other = spawn(io_, protocol(dynamic_job(2, 3)).check_job(node("x")));
  settle();
  EXPECT_EQ(checked->error_message(), "");
  EXPECT_NE(other->error_message(), "");
  auto decisions = join_all(dynamic_job(2, 2), {node("a"), node("b")});
  ASSERT_EQ(decisions.size(), 2U);
  EXPECT_EQ(decisions.front().nodes.size(), 2U);
}

TEST_F(Rounds, EndRoundFirstWins) {
  RendezvousSettings settings = dynamic_job(2, 2);
  auto first = join_all(settings, {node("a"), node("b")}).front();
  const RoundEnd failure{EndKind::failure, "a", "rank 0 failed"};
  const RoundEnd lost{EndKind::lost, "b", "b stopped heart-beating"};
  auto by_a = spawn(io_, protocol(settings).end_round(first.round, failure));
  auto by_b = spawn(io_, protocol(settings).end_round(first.round, lost));
  auto seen = spawn(io_, protocol(settings).wait_end(first.round, 1s));
  settle();
  EXPECT_EQ(by_a->get(), failure);
  EXPECT_EQ(by_b->get(), failure) << "the end that stands is the first";
  EXPECT_EQ(seen->get(), failure);
  // Both moved the current round past the ended one: the next join forms round 1, once.
  auto second = join_all(settings, {node("a"), node("b")});
  EXPECT_EQ(second.front().round, 1);
  EXPECT_EQ(second.front().restart_count, 1) << "a failure counts a restart";
}

TEST_F(Rounds, WaitEndTimesOutWhileTheRoundRuns) {
  RendezvousSettings settings = dynamic_job(1, 1);
  auto first = join_all(settings, {node("a")}).front();
  auto seen = spawn(io_, protocol(settings).wait_end(first.round, 5s));
  run_until([&] { return seen->done; });
  EXPECT_THROW(seen->get(), StoreTimeout);
  EXPECT_EQ(elapsed(), 5s);
}

TEST_F(Rounds, MarkFinishedIsAnExitBarrierAndTheJobIsThenClosedToLateNodes) {
  RendezvousSettings settings = dynamic_job(2, 3);
  auto decisions = join_all(settings, {node("a"), node("b")});
  ASSERT_EQ(decisions.size(), 2U);
  RoundProtocol& p = protocol(settings);
  auto end = spawn(io_, p.wait_end(decisions.front().round, 60s));
  spawn(io_, p.mark_finished(decisions.front(), node("a")));
  settle();
  EXPECT_FALSE(end->done) << "b has not finished yet";
  spawn(io_, p.mark_finished(decisions.front(), node("b")));
  settle();
  ASSERT_TRUE(end->done);
  EXPECT_EQ(end->get().kind, EndKind::finished);
  EXPECT_EQ(end->get().message, "the last node to finish was host-b (127.0.0.1)");

  auto late = spawn(io_, p.join(node("late")));
  settle();
  ASSERT_TRUE(late->done);
  EXPECT_THROW(late->get(), RendezvousClosed);
  EXPECT_EQ(late->error_message(),
            "rendezvous closed: job 'job' already finished in round 0 (the last node to finish was host-b "
            "(127.0.0.1)); start it again with a new --rdzv-id");
}

TEST_F(Rounds, AfterALostNodeTheSurvivorsFormTheNextRoundWithoutTheLastCall) {
  RendezvousSettings settings = dynamic_job(2, 3);
  auto first = join_all(settings, {node("a"), node("b"), node("c")}).front();
  const NodeInfo lost = first.nodes.at(1);
  spawn(io_, protocol(settings).end_round(first.round, RoundEnd{EndKind::lost, lost.id, "lost"}));
  settings.last_call_timeout = 60s;  // the survivors must not wait for it
  std::vector<NodeInfo> survivors;
  for (const auto& n : first.nodes) {
    if (n.id == lost.id) continue;
    NodeInfo again = n;
    again.previous_rank = first.group_rank_of(n.id);
    survivors.push_back(again);
  }
  const SteadyTime start = now();
  auto second = join_all(settings, survivors);
  ASSERT_EQ(second.size(), 2U);
  EXPECT_EQ(now(), start) << "every node expected back is in: no last call";
  EXPECT_EQ(second.front().round, first.round + 1);
  EXPECT_EQ(second.front().restart_count, 0) << "a lost node uses no restart";
  EXPECT_EQ(second.front().nodes.at(0).id, first.nodes.at(0).id);
  EXPECT_EQ(second.front().nodes.at(1).id, first.nodes.at(2).id);
}

TEST_F(Rounds, WhenTheDesignatedCloserIsDeadAnotherNodeClosesAfterTheGrace) {
  // MIN = MAX = 3: a and b join, then a node takes the last slot, writes its record and dies: it
  // was the one to close the round.
  RendezvousSettings settings = dynamic_job(3, 3);
  auto joins = start_joins(settings, {node("a"), node("b")});
  settle();
  RoundProtocol& p = protocol(settings);
  spawn(io_, [](Store& store, RoundKeys keys) -> Task<void> {
    co_await store.add(keys.join_count(0), 1);
    co_await store.set(keys.join_slot(0, 2), encode_node(node("dead")));
  }(store_, p.keys()));
  run_until([&] { return all_done(joins); });
  ASSERT_TRUE(all_done(joins));
  EXPECT_EQ(ids_of(joins[0]->get()), (std::vector<std::string>{"a", "b", "dead"}));
  EXPECT_EQ(encode_decision(joins[1]->get()), encode_decision(joins[0]->get()));
  EXPECT_EQ(elapsed(), kCloserGrace);
}

TEST_F(Rounds, ANodeThatDiedBetweenItsSlotAndItsRecordIsLeftOut) {
  // MIN 2, MAX 3: a and b join; a third node takes the last slot and dies before writing it.
  RendezvousSettings settings = dynamic_job(2, 3);
  settings.read_timeout = 10s;
  auto joins = start_joins(settings, {node("a"), node("b")});
  settle();
  RoundProtocol& p = protocol(settings);
  spawn(io_, store_.add(p.keys().join_count(0), 1));
  run_until([&] { return all_done(joins); });
  ASSERT_TRUE(all_done(joins));
  EXPECT_EQ(ids_of(joins[0]->get()), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(encode_decision(joins[1]->get()), encode_decision(joins[0]->get()));
  // The last call (a and b were MIN of MAX), the closer's grace (the dead node held the closing
  // slot), the read of every record (read_timeout), then the dead node's slot alone (its grace).
  EXPECT_EQ(elapsed(), kLastCall + kCloserGrace + settings.read_timeout + 2s);
}

TEST_F(Rounds, AWaitingNodeReportsItsProgressEveryInterval) {
  RendezvousSettings settings = static_job(3);
  RoundProtocol& p = protocol(settings);
  std::vector<JoinProgress> reports;
  std::vector<milliseconds> at;
  p.on_join_progress(
      [&](const JoinProgress& progress) {
        reports.push_back(progress);
        at.push_back(elapsed());
      },
      5s);
  auto joining = spawn(io_, p.join(node("a", 1, 0)));
  run_for(12s);
  ASSERT_EQ(at, (std::vector<milliseconds>{0s, 5s, 10s}));
  EXPECT_EQ(reports.back().joined, 1);
  EXPECT_EQ(reports.back().missing_ranks, (std::vector<int>{1, 2}));
  auto others = join_all(settings, {node("b", 1, 1), node("c", 1, 2)});
  ASSERT_TRUE(joining->done);
  EXPECT_EQ(joining->get().nodes.size(), 3U);
}

TEST_F(Rounds, HeartbeatsAreCountersAndAMissingOneReadsAsMinusOne) {
  RoundProtocol& p = protocol(dynamic_job(1, 1));
  auto beats = spawn(io_, [](RoundProtocol& protocol, Store& store) -> Task<std::vector<std::int64_t>> {
    co_await protocol.beat("a", 7);
    co_await store.set(protocol.keys().heartbeat("b"), "not a number");
    co_await store.set(protocol.keys().heartbeat("c"), "");
    std::vector<std::string> ids = {"a", "b", "c"};
    co_return co_await protocol.read_beats(ids);
  }(p, store_));
  settle();
  EXPECT_EQ(beats->get(), (std::vector<std::int64_t>{7, -1, -1}));
}

}  // namespace

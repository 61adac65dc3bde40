// This agent's own stalls, from its timers' lateness: explicit time points, no sleeping.
#include "rendezvous/stall_watch.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace ddprun::rendezvous;
using namespace std::chrono_literals;

namespace {

constexpr std::chrono::milliseconds kTolerance = 5s;  // the heartbeat timeout
const StallWatch::Clock::time_point t0{std::chrono::hours(1)};

}  // namespace

TEST(StallWatch, AWakeWithinTheToleranceIsNoStall) {
  StallWatch watch(kTolerance);
  for (auto late : {0ms, 1ms, 4999ms, 5000ms}) {
    watch.sleeping_until(t0 + 1s);
    EXPECT_FALSE(watch.woke(t0 + 1s + late)) << late.count();
  }
}

TEST(StallWatch, AWakeLaterThanTheToleranceIsAStallFromItsDueTime) {
  StallWatch watch(kTolerance);
  watch.sleeping_until(t0 + 5s);
  auto stall = watch.woke(t0 + 5s + 20s);
  ASSERT_TRUE(stall);
  EXPECT_EQ(stall->length(), 20s);
  EXPECT_FALSE(stall->told);
  // Reported once: the next wake on time finds nothing new.
  watch.sleeping_until(t0 + 30s);
  EXPECT_FALSE(watch.woke(t0 + 30s));
}

TEST(StallWatch, AWakeAfterNoSleepIsNoStall) {
  StallWatch watch(kTolerance);
  EXPECT_FALSE(watch.woke(t0));  // the first wait is untimed (until a round forms)
  EXPECT_FALSE(watch.woke(t0 + 1h));
}

TEST(StallWatch, AnotherTimerLateByMoreThanTheToleranceIsAStall) {
  StallWatch watch(kTolerance);
  EXPECT_FALSE(watch.fired(t0 + 60s, t0 + 61s, t0)) << "a timer on time: the store was silent indeed";
  EXPECT_TRUE(watch.fired(t0 + 60s, t0 + 70s, t0));
  // The sleeper learns of it at its next wake, as a stall it has not told.
  auto stall = watch.woke(t0 + 71s);
  ASSERT_TRUE(stall);
  EXPECT_EQ(stall->length(), 10s);
}

TEST(StallWatch, AnOverdueSleeperIsAStallUnderWay) {
  StallWatch watch(kTolerance);
  watch.sleeping_until(t0 + 1s);
  // The store-silence timer runs first after the stop, on time by its own clock: the keep-alive,
  // overdue and not awake yet, is what shows that the agent stood still.
  EXPECT_FALSE(watch.fired(t0 + 3s, t0 + 3s, t0)) << "overdue by less than the tolerance";
  EXPECT_TRUE(watch.fired(t0 + 10s, t0 + 10s, t0));
  // When the sleeper wakes, the stall is one, from its due time.
  auto stall = watch.woke(t0 + 12s);
  ASSERT_TRUE(stall);
  EXPECT_EQ(stall->length(), 11s);
}

TEST(StallWatch, AStallBeforeTheSilenceBeganDoesNotExcuseIt) {
  StallWatch watch(kTolerance);
  watch.sleeping_until(t0);
  ASSERT_TRUE(watch.woke(t0 + 10s));
  EXPECT_FALSE(watch.fired(t0 + 80s, t0 + 80s, t0 + 20s));
}

TEST(StallWatch, TellGivesTheStallOnceToldAndTheSleeperDoesNotTellItAgain) {
  StallWatch watch(kTolerance);
  watch.sleeping_until(t0 + 1s);
  EXPECT_FALSE(watch.tell(t0, t0 + 2s)) << "no stall yet";
  auto told = watch.tell(t0, t0 + 9s);  // the others dropped this node; the keep-alive sleeps on
  ASSERT_TRUE(told);
  EXPECT_EQ(told->length(), 8s);
  auto stall = watch.woke(t0 + 10s);
  ASSERT_TRUE(stall);
  EXPECT_TRUE(stall->told);
  EXPECT_EQ(stall->length(), 9s);
  EXPECT_FALSE(watch.tell(t0 + 10s, t0 + 11s)) << "a stall before `since` explains nothing after it";
}

TEST(StallWatch, OnlyOneTellerClaimsAStall) {
  StallWatch watch(kTolerance);
  EXPECT_FALSE(watch.claim_telling()) << "no stall";
  watch.sleeping_until(t0);
  ASSERT_FALSE(watch.woke(t0 + 10s)->told);
  EXPECT_TRUE(watch.claim_telling());
  EXPECT_FALSE(watch.claim_telling());
  EXPECT_TRUE(watch.tell(t0, t0 + 10s)->told);
  // The watcher told it first: the keep-alive, which woke with it, has nothing to claim.
  watch.sleeping_until(t0 + 20s);
  ASSERT_TRUE(watch.tell(t0 + 10s, t0 + 30s));
  ASSERT_TRUE(watch.woke(t0 + 31s));
  EXPECT_FALSE(watch.claim_telling());
}

TEST(DescribeOwnStall, SaysThisAgentAndNotTheOthers) {
  struct Case {
    std::chrono::milliseconds stall;
    std::vector<std::string> not_blamed;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {20s, {}, "this agent was unresponsive for 20 s (stopped or starved?)"},
      {4567ms, {}, "this agent was unresponsive for 4.5 s (stopped or starved?)"},
      {20s, {"b (10.0.0.2)"}, "this agent was unresponsive for 20 s (stopped or starved?), not node b (10.0.0.2)"},
      {20s, {"b (10.0.0.2)", "c (10.0.0.3)"},
       "this agent was unresponsive for 20 s (stopped or starved?), not nodes b (10.0.0.2) and c (10.0.0.3)"},
      {20s, {"b", "c", "d"}, "this agent was unresponsive for 20 s (stopped or starved?), not nodes b, c and d"},
  };
  for (const auto& c : cases) EXPECT_EQ(describe_own_stall(c.stall, c.not_blamed), c.expected);
}

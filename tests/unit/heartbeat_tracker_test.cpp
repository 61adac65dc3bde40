// Heartbeats judged by this node's clock: explicit time points, no sleeping.
#include "rendezvous/heartbeat_tracker.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace ddprun::rendezvous;
using namespace std::chrono_literals;
using Strings = std::vector<std::string>;

namespace {

constexpr std::chrono::milliseconds kLostAfter = 15s;
const HeartbeatTracker::Clock::time_point t0{};

}  // namespace

TEST(HeartbeatTracker, ChangingCounterIsNeverLost) {
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a"}, t0);
  for (int beat = 1; beat <= 20; ++beat) {
    auto now = t0 + beat * 10s;  // well past lost_after in total, but never silent that long
    tracker.observe({beat}, now);
    EXPECT_EQ(tracker.lost(now), Strings{}) << beat;
    EXPECT_EQ(tracker.lost(now + kLostAfter - 1ms), Strings{}) << beat;
  }
}

TEST(HeartbeatTracker, UnchangedCounterIsLostExactlyAfterLostAfter) {
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a", "b"}, t0);
  tracker.observe({7, 1}, t0 + 1s);
  tracker.observe({7, 2}, t0 + 5s);
  tracker.observe({7, 3}, t0 + 10s);
  // a changed (from nothing to 7) at 1 s and never after.
  EXPECT_EQ(tracker.lost(t0 + 1s + kLostAfter - 1ms), Strings{});
  tracker.observe({7, 4}, t0 + 1s + kLostAfter);
  EXPECT_EQ(tracker.lost(t0 + 1s + kLostAfter), Strings{"a"});
  EXPECT_EQ(tracker.lost(t0 + 1s + kLostAfter + 1h), (Strings{"a", "b"}));
}

TEST(HeartbeatTracker, NoHeartbeatKeyCountsAsUnchanged) {
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a"}, t0);
  for (auto at : {1s, 5s, 10s, 14s}) tracker.observe({-1}, t0 + at);
  EXPECT_EQ(tracker.lost(t0 + kLostAfter - 1ms), Strings{});
  EXPECT_EQ(tracker.lost(t0 + kLostAfter), Strings{"a"});
}

TEST(HeartbeatTracker, VanishingKeyDoesNotRefreshANode) {
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a"}, t0);
  tracker.observe({3}, t0 + 2s);
  tracker.observe({-1}, t0 + 4s);
  // The same counter read again after a gap is no sign of life: a dead node's counter stays put.
  tracker.observe({3}, t0 + 6s);
  EXPECT_EQ(tracker.lost(t0 + 2s + kLostAfter - 1ms), Strings{});
  EXPECT_EQ(tracker.lost(t0 + 2s + kLostAfter), Strings{"a"});
}

TEST(HeartbeatTracker, NewlyWatchedNodeCountsAsSeenNow) {
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a"}, t0 + 100s);
  EXPECT_EQ(tracker.lost(t0 + 100s + kLostAfter - 1ms), Strings{});
  EXPECT_EQ(tracker.lost(t0 + 100s + kLostAfter), Strings{"a"});
}

TEST(HeartbeatTracker, NewRoundKeepsKnownNodesAndStartsNewOnesFresh) {
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a", "b"}, t0);
  tracker.observe({1, 1}, t0);
  tracker.watch({"b", "c"}, t0 + 10s);
  EXPECT_EQ(tracker.watched(), (Strings{"b", "c"}));
  // Counters now follow the new order: b keeps its 1 (unchanged since t0), c starts at 10 s.
  tracker.observe({1, 5}, t0 + 12s);
  EXPECT_EQ(tracker.lost(t0 + kLostAfter), Strings{"b"});
  EXPECT_EQ(tracker.lost(t0 + 12s + kLostAfter - 1ms), Strings{"b"});
  EXPECT_EQ(tracker.lost(t0 + 12s + kLostAfter), (Strings{"b", "c"}));
}

TEST(HeartbeatTracker, RewatchingDoesNotRefreshASilentNode) {
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a"}, t0);
  tracker.watch({"a"}, t0 + 10s);
  EXPECT_EQ(tracker.lost(t0 + kLostAfter), Strings{"a"});
}

TEST(HeartbeatTracker, NodesNoLongerWatchedAreNotReported) {
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a", "b"}, t0);
  tracker.observe({1, 1}, t0);
  tracker.watch({"b"}, t0 + 1s);
  EXPECT_EQ(tracker.lost(t0 + 1h), Strings{"b"});
  tracker.watch({}, t0 + 2s);
  EXPECT_EQ(tracker.lost(t0 + 1h), Strings{});
}

TEST(HeartbeatTracker, SilenceThisNodeDidNotWatchIsExcused) {
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a", "b"}, t0);
  tracker.observe({1, 1}, t0 + 1s);
  // This node stood still from 2 s to 40 s; the counters it reads after look unchanged, perhaps
  // because the store stood still with it.
  tracker.observe({1, 1}, t0 + 40s);
  EXPECT_EQ(tracker.lost(t0 + 40s), (Strings{"a", "b"})) << "what an unexcused stall would blame";
  tracker.excuse_silence(t0 + 40s);
  EXPECT_EQ(tracker.lost(t0 + 40s), Strings{});
  // Each gets a whole lost_after from then on, and no more.
  tracker.observe({2, 1}, t0 + 45s);
  EXPECT_EQ(tracker.lost(t0 + 40s + kLostAfter - 1ms), Strings{});
  EXPECT_EQ(tracker.lost(t0 + 40s + kLostAfter), Strings{"b"});
}

TEST(HeartbeatTracker, ExcusingNeverMovesASeenChangeBack) {
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a"}, t0);
  tracker.observe({5}, t0 + 30s);
  tracker.excuse_silence(t0 + 10s);  // an older excuse
  EXPECT_EQ(tracker.lost(t0 + 30s + kLostAfter - 1ms), Strings{});
}

TEST(HeartbeatTracker, AKeyThatWasThereAndVanishedIsLostAtOnce) {
  // On etcd-v3 a node's heartbeat lives with its lease: gone means the lease expired.
  HeartbeatTracker tracker(kLostAfter);
  tracker.watch({"a", "b"}, t0);
  tracker.observe({3, 1}, t0 + 2s);
  tracker.observe({-1, 2}, t0 + 4s);
  EXPECT_EQ(tracker.lost(t0 + 4s), Strings{"a"});
  // Back with a new counter (its agent woke and beat again): alive.
  tracker.observe({4, 3}, t0 + 6s);
  EXPECT_EQ(tracker.lost(t0 + 6s), Strings{});
}

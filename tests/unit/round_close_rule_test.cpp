// The round-closing rule (rendezvous/round_close_rule.hpp), by table: every way a look at a
// forming round can end (close, wait for MIN, wait for the decision, time out) and every timer it
// starts.
#include "rendezvous/round_close_rule.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace ddprun::rendezvous;
using namespace std::chrono_literals;
using Next = CloseVerdict::Next;

namespace {

const SteadyTime t0 = SteadyTime{} + 1000s;
constexpr auto kLastCall = 30s;
constexpr auto kDeadline = 600s;

/// A look by the node in `slot` at `at` seconds after t0, with `count` of MIN..MAX nodes in.
RoundLook look(int count, int min, int max, int slot, std::chrono::milliseconds at, CloseTimers timers = {},
               bool expected_back = false) {
  RoundLook l;
  l.count = count;
  l.min_nodes = min;
  l.max_nodes = max;
  l.slot = slot;
  l.expected_back = expected_back;
  l.last_call_timeout = kLastCall;
  l.now = t0 + at;
  l.deadline = t0 + kDeadline;
  l.timers = timers;
  return l;
}

CloseTimers last_call_from(std::chrono::milliseconds at) { return CloseTimers{t0 + at + kLastCall, std::nullopt}; }
CloseTimers with_grace(CloseTimers timers, std::chrono::milliseconds from) {
  timers.closer_grace_end = t0 + from + kCloserGrace;
  return timers;
}

CloseVerdict verdict(bool close, Next next, std::chrono::milliseconds wake, CloseTimers timers) {
  return CloseVerdict{close, next, t0 + wake, timers};
}

std::string describe(const CloseVerdict& v) {
  auto at = [](SteadyTime t) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(t - t0).count()); };
  std::string s = std::string(v.close ? "close" : "no close") + ", next " +
                  (v.next == Next::time_out ? "time_out" : v.next == Next::wait_for_min ? "wait_for_min" : "wait_for_decision") +
                  ", wake " + at(v.wake);
  s += ", last call end " + (v.timers.last_call_end ? at(*v.timers.last_call_end) : std::string("-"));
  s += ", grace end " + (v.timers.closer_grace_end ? at(*v.timers.closer_grace_end) : std::string("-"));
  return s;
}

}  // namespace

TEST(RoundCloseRule, EveryCase) {
  const CloseTimers none;
  struct Case {
    const char* what;
    RoundLook look;
    CloseVerdict expected;
  } cases[] = {
      // Fewer than MIN.
      {"fewer than MIN: wait for the MIN-th join until the deadline", look(1, 3, 3, 0, 5s),
       verdict(false, Next::wait_for_min, kDeadline, none)},
      {"fewer than MIN at the deadline: time out", look(2, 3, 3, 1, kDeadline),
       verdict(false, Next::time_out, kDeadline, none)},
      {"fewer than MIN past the deadline: time out", look(0, 2, 4, 0, kDeadline + 1s),
       verdict(false, Next::time_out, kDeadline, none)},
      // Full rounds (static, or c10d with MAX in).
      {"full, this node filled it: close at once", look(3, 3, 3, 2, 5s),
       verdict(true, Next::wait_for_decision, 5s + kLastCall, last_call_from(5s))},
      {"full, MIN < MAX, this node filled it: close at once, no last call", look(4, 2, 4, 3, 5s),
       verdict(true, Next::wait_for_decision, 5s + kLastCall, last_call_from(5s))},
      {"full, another node filled it: leave it the closer's grace", look(3, 3, 3, 0, 5s),
       verdict(false, Next::wait_for_decision, 5s + kCloserGrace, with_grace(last_call_from(5s), 5s))},
      {"full, the closer's grace still runs: wait on", look(3, 3, 3, 0, 6s, with_grace(last_call_from(5s), 5s)),
       verdict(false, Next::wait_for_decision, 5s + kCloserGrace, with_grace(last_call_from(5s), 5s))},
      {"full, the closer's grace is over: close", look(3, 3, 3, 1, 7s, with_grace(last_call_from(5s), 5s)),
       verdict(true, Next::wait_for_decision, 5s + kCloserGrace, with_grace(last_call_from(5s), 5s))},
      {"full, designated, past the deadline: close all the same", look(3, 3, 3, 2, kDeadline + 1s),
       verdict(true, Next::time_out, kDeadline, last_call_from(kDeadline + 1s))},
      {"full, not designated, past the deadline: the grace starts, time out",
       look(3, 3, 3, 0, kDeadline), verdict(false, Next::time_out, kDeadline, with_grace(last_call_from(kDeadline), kDeadline))},
      {"full, grace ends after the deadline: wake at the deadline", look(3, 3, 3, 0, kDeadline - 1s),
       verdict(false, Next::wait_for_decision, kDeadline, with_grace(last_call_from(kDeadline - 1s), kDeadline - 1s))},
      // The last call (MIN <= count < MAX).
      {"MIN in, first look: the last call starts", look(2, 2, 4, 0, 5s),
       verdict(false, Next::wait_for_decision, 5s + kLastCall, last_call_from(5s))},
      {"MIN in, the last call runs: wait for its end", look(3, 2, 4, 2, 20s, last_call_from(5s)),
       verdict(false, Next::wait_for_decision, 5s + kLastCall, last_call_from(5s))},
      {"the last call ends near the deadline: wake at the deadline", look(2, 2, 4, 0, kDeadline - 10s),
       verdict(false, Next::wait_for_decision, kDeadline, last_call_from(kDeadline - 10s))},
      {"the last call is over, this node made MIN: close", look(3, 2, 4, 1, 35s, last_call_from(5s)),
       verdict(true, Next::wait_for_decision, 5s + kLastCall, last_call_from(5s))},
      {"the last call is over, another node made MIN: leave it the closer's grace",
       look(3, 2, 4, 2, 35s, last_call_from(5s)),
       verdict(false, Next::wait_for_decision, 35s + kCloserGrace, with_grace(last_call_from(5s), 35s))},
      {"the last call is over and so is the closer's grace: close", look(3, 2, 4, 0, 38s, with_grace(last_call_from(5s), 35s)),
       verdict(true, Next::wait_for_decision, 35s + kCloserGrace, with_grace(last_call_from(5s), 35s))},
      {"MIN == 1: the only node made MIN, closes at the end of the last call", look(1, 1, 2, 0, 35s, last_call_from(5s)),
       verdict(true, Next::wait_for_decision, 5s + kLastCall, last_call_from(5s))},
      {"no last call (timeout 0): MIN in closes at the first look", [] {
         RoundLook l = look(2, 2, 4, 1, 5s);
         l.last_call_timeout = 0s;
         return l;
       }(),
       verdict(true, Next::wait_for_decision, 5s, CloseTimers{t0 + 5s, std::nullopt})},
      // Back after a membership change.
      {"every expected node back: close at once, whichever slot", look(2, 2, 4, 0, 5s, none, true),
       verdict(true, Next::wait_for_decision, 5s + kLastCall, last_call_from(5s))},
      {"every expected node back, another slot: close too", look(3, 2, 4, 2, 5s, none, true),
       verdict(true, Next::wait_for_decision, 5s + kLastCall, last_call_from(5s))},
      {"expected nodes back but the round is full: the filling node closes", look(4, 2, 4, 0, 5s, none, true),
       verdict(false, Next::wait_for_decision, 5s + kCloserGrace, with_grace(last_call_from(5s), 5s))},
      {"expected nodes not all back: the last call", look(2, 2, 4, 1, 5s, none, false),
       verdict(false, Next::wait_for_decision, 5s + kLastCall, last_call_from(5s))},
      {"expected back below MIN counts for nothing", look(1, 2, 4, 0, 5s, none, true),
       verdict(false, Next::wait_for_min, kDeadline, none)},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const CloseVerdict got = close_rule(c.look);
    EXPECT_EQ(got, c.expected) << "got: " << describe(got) << "\nwant: " << describe(c.expected);
  }
}

TEST(RoundCloseRule, ExpectedBackIsWorthReadingTheJoinsOnlyWhenItCanBeTrue) {
  struct Case {
    int count, max;
    std::size_t expected;
    bool possible;
  } cases[] = {
      {2, 4, 2, true},   // as many in as expected
      {3, 4, 2, true},   // more (a new node too)
      {1, 4, 2, false},  // fewer
      {4, 4, 2, false},  // full: the filling node closes anyway
      {2, 4, 0, false},  // nobody expected (the first round, or a round after a failure of all)
  };
  for (const auto& c : cases) {
    EXPECT_EQ(expected_back_possible(c.count, c.max, c.expected), c.possible)
        << c.count << " in of MAX " << c.max << ", " << c.expected << " expected";
  }
}

#pragma once
/// The time the rendezvous reads: the monotonic clock, or a clock a test moves by hand, so that
/// deadlines (join timeout, last call, closer grace, keep-alive waits) can be driven without
/// sleeping. Only deadlines follow it; machines' clocks are never compared.
#include <chrono>
#include <functional>

namespace ddprun::rendezvous {

using SteadyTime = std::chrono::steady_clock::time_point;

/// Returns "now". Empty means the real one (steady_clock::now).
using ClockFn = std::function<SteadyTime()>;

/// `clock`, or steady_clock::now when it is empty.
inline ClockFn or_steady_clock(ClockFn clock) {
  if (clock) return clock;
  return [] { return std::chrono::steady_clock::now(); };
}

}  // namespace ddprun::rendezvous

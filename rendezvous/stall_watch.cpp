#include "rendezvous/stall_watch.hpp"

#include <algorithm>

#include "rendezvous/deadline.hpp"  // describe_duration

namespace ddprun::rendezvous {

void StallWatch::record(Stall stall) {
  // Two timers late over the same stretch saw one stall: it keeps its start and whether it was told.
  if (last_ && stall.began <= last_->ended && stall.ended >= last_->began) {
    last_->began = std::min(last_->began, stall.began);
    last_->ended = std::max(last_->ended, stall.ended);
    return;
  }
  last_ = stall;
}

std::optional<StallWatch::Stall> StallWatch::current(Clock::time_point now) {
  if (due_ && now - *due_ > tolerance_) record(Stall{*due_, now});
  return last_;
}

std::optional<StallWatch::Stall> StallWatch::woke(Clock::time_point now) {
  if (due_ && now - *due_ > tolerance_) record(Stall{*due_, now});
  due_.reset();
  const Clock::time_point previous = last_wake_;
  last_wake_ = now;
  if (last_ && last_->ended > previous) return last_;
  return std::nullopt;
}

bool StallWatch::fired(Clock::time_point due, Clock::time_point now, Clock::time_point since) {
  if (now - due > tolerance_) record(Stall{due, now});
  auto stall = current(now);
  return stall && stall->ended > since;
}

std::optional<StallWatch::Stall> StallWatch::tell(Clock::time_point since, Clock::time_point now) {
  auto stall = current(now);
  if (!stall || stall->ended <= since) return std::nullopt;
  last_->told = true;
  return stall;
}

std::string describe_own_stall(std::chrono::milliseconds stall, const std::vector<std::string>& not_blamed) {
  // Tenths of a second: the stall is measured from a timer's due time, not to the millisecond.
  auto shown = std::chrono::milliseconds(std::max<long long>(stall.count() / 100 * 100, 100));
  std::string text = "this agent was unresponsive for " + describe_duration(shown) + " (stopped or starved?)";
  if (not_blamed.empty()) return text;
  text += not_blamed.size() == 1 ? ", not node " : ", not nodes ";
  for (std::size_t i = 0; i < not_blamed.size(); ++i) {
    if (i > 0) text += i + 1 == not_blamed.size() ? " and " : ", ";
    text += not_blamed[i];
  }
  return text;
}

}  // namespace ddprun::rendezvous

#pragma once
/// StallWatch: notices that this agent itself made no progress for a while (stopped by SIGSTOP, a
/// paused VM, a starved CPU), from its own timers on the monotonic clock: a timed wait that ends
/// much later than it was due means that nothing of this process ran in between. Whatever the agent
/// saw of the others over that time (a heartbeat that did not move, a store that did not answer) is
/// then no evidence against them, and its messages must say so instead of blaming them.
///
/// Pure: time points are passed in, and the caller serializes the calls (one mutex).
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::rendezvous {

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  /// A time this agent made no progress: from when a timer was due to when it ran.
  struct Stall {
    Clock::time_point began;
    Clock::time_point ended;
    bool told = false;  ///< a message has named it already
    std::chrono::milliseconds length() const {
      return std::chrono::duration_cast<std::chrono::milliseconds>(ended - began);
    }
  };

  /// A timer that runs later than due by more than `tolerance` was stalled. The heartbeat timeout
  /// is the natural tolerance: no responsive agent is ever late by that much.
  explicit StallWatch(std::chrono::milliseconds tolerance) : tolerance_(tolerance) {}

  /// The ticking thread (the keep-alive) goes to sleep until `due`.
  void sleeping_until(Clock::time_point due) { due_ = due; }
  /// It woke at `now`. Returns the stall that ended since its previous wake (found by this wake, or
  /// by fired() meanwhile), if any.
  std::optional<Stall> woke(Clock::time_point now);

  /// Another timer, due at `due`, ran at `now` (the check for a silent store); returns whether this
  /// agent was stalled, by this timer's lateness or by anything recorded since `since` (the time
  /// the silence began), including a sleeper that is overdue now and has not woken yet.
  bool fired(Clock::time_point due, Clock::time_point now, Clock::time_point since);

  /// For a message that explains a consequence of the stall (the others dropped this node): the
  /// stall that ended after `since` or is under way at `now`, which is then told.
  std::optional<Stall> tell(Clock::time_point since, Clock::time_point now);

  /// Marks the last stall told; returns whether it was not yet, so that of two threads that found
  /// the same stall (the keep-alive and the watcher), exactly one tells it.
  bool claim_telling() {
    if (!last_ || last_->told) return false;
    last_->told = true;
    return true;
  }

 private:
  void record(Stall stall);
  /// The last recorded stall, extended by a sleeper overdue at `now`.
  std::optional<Stall> current(Clock::time_point now);

  std::chrono::milliseconds tolerance_;
  std::optional<Clock::time_point> due_;  ///< the sleeper's wake time, while it sleeps
  std::optional<Stall> last_;
  Clock::time_point last_wake_{};  ///< the sleeper's previous wake
};

/// "this agent was unresponsive for 12 s (stopped or starved?)", and ", not node a (10.0.0.1)" (or
/// "not nodes a (...) and b (...)") when the agent would otherwise have blamed those nodes.
std::string describe_own_stall(std::chrono::milliseconds stall, const std::vector<std::string>& not_blamed);

}  // namespace ddprun::rendezvous

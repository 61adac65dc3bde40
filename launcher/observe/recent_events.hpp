#pragma once
/// RecentEvents: the last events of the job, in memory, for readers that come and go (the status
/// endpoint's timeline, `ddprun status`). Bounded: the oldest goes when it is full, so a job that
/// restarts for a week holds the same memory as one that just began. On the agent's loop only.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "launcher/observe/job_event.hpp"

namespace ddprun::launcher {

class RecentEvents : public JobEventSink {
 public:
  static constexpr std::size_t kDefaultCapacity = 1000;

  explicit RecentEvents(std::size_t capacity = kDefaultCapacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  void record(const JobEvent& event) override;

  /// The events kept, oldest first (at most the capacity).
  const std::deque<JobEvent>& events() const { return events_; }
  /// Events recorded since the job began, kept or not: event number n (0-based) is
  /// events()[n - (recorded() - events().size())] while it is kept.
  std::uint64_t recorded() const { return recorded_; }
  /// The kept events numbered `first` and after (a reader that saw `first` events asks for the
  /// rest); all kept events when `first` is older than the oldest kept.
  std::vector<JobEvent> since(std::uint64_t first) const;

 private:
  std::size_t capacity_;
  std::deque<JobEvent> events_;
  std::uint64_t recorded_ = 0;
};

}  // namespace ddprun::launcher

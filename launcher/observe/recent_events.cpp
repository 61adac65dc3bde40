#include "launcher/observe/recent_events.hpp"

namespace ddprun::launcher {

void RecentEvents::record(const JobEvent& event) {
  if (events_.size() == capacity_) events_.pop_front();
  events_.push_back(event);
  ++recorded_;
}

std::vector<JobEvent> RecentEvents::since(std::uint64_t first) const {
  const std::uint64_t oldest = recorded_ - events_.size();
  const std::uint64_t skip = first > oldest ? first - oldest : 0;
  if (skip >= events_.size()) return {};
  return {events_.begin() + static_cast<std::ptrdiff_t>(skip), events_.end()};
}

}  // namespace ddprun::launcher

#include "rendezvous/heartbeat_tracker.hpp"

#include <algorithm>

namespace ddprun::rendezvous {

void HeartbeatTracker::watch(const std::vector<std::string>& node_ids, Clock::time_point now) {
  std::map<std::string, Seen> kept;
  for (const auto& id : node_ids) {
    auto it = seen_.find(id);
    kept[id] = it != seen_.end() ? it->second : Seen{-1, now};
  }
  seen_ = std::move(kept);
  order_ = node_ids;
}

void HeartbeatTracker::observe(const std::vector<std::int64_t>& counters, Clock::time_point now) {
  for (std::size_t i = 0; i < counters.size() && i < order_.size(); ++i) {
    Seen& seen = seen_[order_[i]];
    // No key (or an unreadable one) says nothing, unless there was one: only a new counter proves
    // the node alive, and a key that went away went with the node's lease.
    if (counters[i] < 0) {
      if (seen.counter >= 0) seen.vanished = true;
      continue;
    }
    seen.vanished = false;
    if (counters[i] != seen.counter) {
      seen.changed = now;
      seen.counter = counters[i];
    }
  }
}

std::vector<std::string> HeartbeatTracker::lost(Clock::time_point now) const {
  std::vector<std::string> out;
  for (const auto& id : order_) {
    auto it = seen_.find(id);
    if (it != seen_.end() && (it->second.vanished || now - it->second.changed >= lost_after_)) out.push_back(id);
  }
  return out;
}

void HeartbeatTracker::excuse_silence(Clock::time_point now) {
  for (auto& [id, seen] : seen_) seen.changed = std::max(seen.changed, now);
}

}  // namespace ddprun::rendezvous

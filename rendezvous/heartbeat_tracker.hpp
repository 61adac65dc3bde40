#pragma once
/// HeartbeatTracker: which peers stopped heart-beating, judged by this node's own clock only. A
/// peer is alive while its counter keeps changing; machines' clocks are never compared.
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddprun::rendezvous {

class HeartbeatTracker {
 public:
  using Clock = std::chrono::steady_clock;

  /// A peer whose counter has not changed for `lost_after` is lost.
  explicit HeartbeatTracker(std::chrono::milliseconds lost_after) : lost_after_(lost_after) {}

  /// Starts watching exactly `node_ids` (a new round), keeping what is known of those already
  /// watched; a newly watched node counts as seen `now`.
  void watch(const std::vector<std::string>& node_ids, Clock::time_point now);

  /// Records the counters read at `now` (in the order of the last watch()); -1 = no heartbeat key.
  /// A node whose counter was seen and now reads -1 is lost at once: its key vanished, which on a
  /// store with leases (etcd-v3) means its lease expired (on a TCPStore keys never vanish).
  void observe(const std::vector<std::int64_t>& counters, Clock::time_point now);

  /// The watched nodes whose counter has not changed for lost_after, as of `now`.
  std::vector<std::string> lost(Clock::time_point now) const;

  /// This node was itself unresponsive until `now` (stall_watch.hpp): what it saw of the others
  /// meanwhile proves nothing (the store may have been frozen with it), so every watched node counts
  /// as seen `now`, and gets a whole lost_after to beat again.
  void excuse_silence(Clock::time_point now);

  const std::vector<std::string>& watched() const { return order_; }

 private:
  struct Seen {
    std::int64_t counter = -1;
    Clock::time_point changed;
    bool vanished = false;
  };
  std::chrono::milliseconds lost_after_;
  std::vector<std::string> order_;
  std::map<std::string, Seen> seen_;
};

}  // namespace ddprun::rendezvous

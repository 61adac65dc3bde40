#pragma once
/// KeySpace: the store's state and the meaning of every request, without sockets. A request from
/// one session yields its reply, and the bytes other sessions are owed (WAIT wake-ups, legacy
/// WATCH_KEY pushes). The server runs it on one thread; tests drive it directly.
///
/// What a session can make it hold besides the keys, values and queue items it stores: the keys of
/// its one live WAIT (a second WAIT abandons the first; abandoned registrations are swept once they
/// outnumber both 4096 and the live ones), and at most kMaxWatchedKeys WATCH_KEY registrations.
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rendezvous/wire.hpp"

namespace ddprun::rendezvous {

using SessionId = std::uint64_t;

class KeySpace {
 public:
  /// Distinct keys one session may watch (legacy WATCH_KEY); one more is a protocol violation.
  /// Each costs two copies of its key: at most 16 MiB a session under the default key limit.
  static constexpr std::size_t kMaxWatchedKeys = 1024;

  /// `limits.max_value_bytes` bounds what APPEND may grow a value to; the other limits are the
  /// decoder's business.
  explicit KeySpace(const wire::Limits& limits = {}) : max_value_bytes_(limits.max_value_bytes) {}

  struct Delivery {
    SessionId session;
    /// Shared: one WATCH_KEY push goes to every watcher of its key without a copy each, so that
    /// each receiver can check it against its own budget before it costs anything.
    std::shared_ptr<const std::string> bytes;
  };
  struct Outcome {
    std::string reply;                ///< to the requesting session (may be empty: SET has none)
    std::vector<Delivery> deliveries;  ///< owed to sessions, possibly the requester (comes before `reply`)
    std::string error;                ///< non-empty: a protocol violation; close the requester's connection
  };

  /// Executes `request` from `session`. Dialect-independent: the caller decoded it.
  Outcome execute(SessionId session, const wire::Request& request);

  /// The size of `Outcome::reply` that execute(request) would give now, without building it: the
  /// server checks it against the connection's budget first. A WAIT counts its one byte whether it
  /// is answered now or later; a request that execute refuses counts what it would have replied.
  /// Deliveries are not counted (each receiver checks its own). Saturates at SIZE_MAX.
  std::size_t reply_bytes(const wire::Request& request) const;

  /// The session's connection is gone: drop its waits and watches.
  void forget(SessionId session);

  /// Drops every key, queue, wait and watch.
  void clear();

  /// Drops every key and queue whose name does not start with `kept` (as stored: PyTorch's "/"
  /// included); returns how many went. Waits and watches stay: they belong to live sessions, and a
  /// key that comes back wakes them as any new key does. For a store shared by attempts of a job.
  std::size_t erase_all_but(const std::string& kept);

  std::size_t key_count() const { return data_.size(); }

 private:
  struct PendingWait {
    std::uint64_t generation = 0;  ///< tells a live wait from stale registrations of older ones
    std::size_t missing = 0;       ///< keys not yet present
    bool active = false;
  };
  struct Registration {
    SessionId session;
    std::uint64_t generation;
  };

  bool present(const std::string& key) const;
  /// `key` now exists: count it for every wait on it, and complete the waits it finishes.
  void key_appeared(const std::string& key, Outcome& outcome);
  /// An item was pushed to queue `key`: it is for one waiter only, the first in arrival order.
  void queue_item_arrived(const std::string& key, Outcome& outcome);
  /// Counts a present key for a live registration; true when that completes its wait.
  bool count_for(const Registration& registration, Outcome& outcome);
  /// The legacy WATCH_KEY callbacks of `key`, if anyone watches it.
  void key_changed(const std::string& key, const std::string* old_value, const std::string* new_value,
                   Outcome& outcome);
  void push_to_watchers(const std::string& key, std::string push, Outcome& outcome);
  void handle_watch(SessionId session, const std::string& key, Outcome& outcome);
  void handle_append(const std::string& key, const std::string& tail, Outcome& outcome);

  void handle_wait(SessionId session, const wire::Request& request, Outcome& outcome);
  /// A wait ended without its keys (cancelled, or its session gone): its registrations went stale.
  void abandon_wait(PendingWait& wait);
  void handle_cancel_wait(SessionId session, Outcome& outcome);

  std::size_t max_value_bytes_;
  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<std::string, std::deque<std::string>> queues_;
  std::unordered_map<std::string, std::vector<Registration>> waiters_;
  std::unordered_map<SessionId, PendingWait> waits_;
  std::unordered_map<std::string, std::unordered_set<SessionId>> watchers_;
  std::unordered_map<SessionId, std::vector<std::string>> watched_by_;
  /// Registrations of abandoned waits still in waiters_ (for keys that never appeared). Swept
  /// when they outnumber a bound, so that clients timing out on missing keys cannot grow memory
  /// for ever, at amortized O(1) a wait.
  std::size_t stale_registrations_ = 0;
  std::size_t live_registrations_ = 0;
};

}  // namespace ddprun::rendezvous

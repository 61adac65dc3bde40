#pragma once
/// A watch on a gloo group's connections that learns at once when one breaks, whatever gloo's own
/// I/O was doing then.
///
/// gloo's TCP pair fails the operations still queued on a connection when it breaks, but not a send
/// it is already writing to the socket nor a receive it is already reading: a rank waiting on either
/// waits out the whole timeout (this gloo, Debian's 0.0~git20220518). So each rank keeps one receive
/// per peer posted on a slot of its own (gloo fails it when that connection breaks) and waits for it
/// on a thread of its own. Nothing runs per operation.
///
/// A rank also tells its peers on that slot, before it closes its connections, why: it leaves
/// cleanly (its group destroyed: the close is no failure), or it gives up (a failure of its own, or
/// the loss of a rank it names, so that every survivor names the rank that died, not the first to
/// give up).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace ddprun::detail {

/// What a peer said before closing, as it travels (one int32 per peer).
namespace notice {
constexpr std::int32_t kNone = 0;
constexpr std::int32_t kLeaving = 1;         ///< its group was destroyed after its last operation
constexpr std::int32_t kGaveUp = 2;          ///< after a failure of its own
constexpr std::int32_t kLostRankBase = 3;    ///< kLostRankBase + r: it lost its connection to rank r
constexpr std::int32_t lost(int rank) { return rank >= 0 ? kLostRankBase + rank : kGaveUp; }
}  // namespace notice

class PeerWatch {
 public:
  /// Posts the receives (before the group's last step of joining: a peer's receive is then known to
  /// this rank by the time the group is up, so a notice never waits for it).
  explicit PeerWatch(std::shared_ptr<gloo::Context> context);
  ~PeerWatch();  ///< stop()
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  /// Starts the thread. At most one of the callbacks runs, once, on it: `on_broken` with gloo's
  /// exception (it quotes the peer's address) when a connection breaks without a notice;
  /// `on_gave_up(peer, lost)` when a peer gave up (`lost`: the rank it lost, or -1). A failure of
  /// this rank's own operation (gloo's "Application timeout caused pair closure") is that
  /// operation's to report, so it does not count.
  void start(std::function<void(const std::exception&)> on_broken, std::function<void(int, int)> on_gave_up);
  /// Ends the thread (the callbacks may still run meanwhile); idempotent.
  void stop();
  /// Sends `value` (a notice::) to every peer whose connection still works; only the first call
  /// sends (each peer has one receive posted). With `limit` > 0 waits
  /// up to that long for the sends; with 0, what could be written at once is written (enough
  /// before closing the connections: the notice is then ahead of the close in each stream).
  void tell_peers(std::int32_t value, std::chrono::milliseconds limit);

 private:
  void watch();

  std::shared_ptr<gloo::Context> context_;
  std::vector<std::int32_t> received_;  // one per rank; only notices land here
  std::unique_ptr<gloo::transport::UnboundBuffer> receive_;
  std::function<void(const std::exception&)> on_broken_;
  std::function<void(int, int)> on_gave_up_;
  std::atomic<bool> told_{false};
  std::thread thread_;
};

}  // namespace ddprun::detail

#include "gloo_peer_watch.hpp"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <atomic>
#include <string_view>

namespace ddprun::detail {
namespace {

/// A slot prefix that gloo's collectives (0x01..0x08) and ddprun's own (0x40..0x42) do not use.
constexpr std::uint8_t kWatchSlotPrefix = 0x43;

/// The watch waits "forever" but gloo's wait takes a timeout (and, when it passes, fails every
/// connection of the context): ten years, repeated.
constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365 * 10);

std::uint64_t watch_slot() { return gloo::Slot::build(kWatchSlotPrefix, 0); }

}  // namespace

PeerWatch::PeerWatch(std::shared_ptr<gloo::Context> context)
    : context_(std::move(context)), received_(static_cast<std::size_t>(context_->size), notice::kNone) {
  receive_ = context_->createUnboundBuffer(received_.data(), received_.size() * sizeof(std::int32_t));
  for (int peer = 0; peer < context_->size; ++peer) {
    if (peer == context_->rank) continue;
    receive_->recv(peer, watch_slot(), static_cast<std::size_t>(peer) * sizeof(std::int32_t), sizeof(std::int32_t));
  }
}

PeerWatch::~PeerWatch() { stop(); }

void PeerWatch::stop() {
  receive_->abortWaitRecv();  // a flag: ends the wait even if it has not begun yet
  if (thread_.joinable()) thread_.join();
}

void PeerWatch::start(std::function<void(const std::exception&)> on_broken, std::function<void(int, int)> on_gave_up) {
  on_broken_ = std::move(on_broken);
  on_gave_up_ = std::move(on_gave_up);
  thread_ = std::thread([this] { watch(); });
}

void PeerWatch::watch() {
  std::vector<bool> heard(received_.size(), false);
  int completed = 0;  // notices received in full (each wait that returns true is one)
  auto value_of = [&](int peer) {
    return std::atomic_ref<std::int32_t>(received_[static_cast<std::size_t>(peer)]).load(std::memory_order_relaxed);
  };
  try {
    int from = -1;
    while (receive_->waitRecv(&from, kForever)) {
      ++completed;
      // Two notices may arrive before this thread wakes: gloo then gives the last sender twice.
      // Every entry read as set is complete unless more are set than have completed (one is being
      // written): then only `from` is certain, and the next completion brings the rest.
      int set = 0;
      for (int peer = 0; peer < static_cast<int>(received_.size()); ++peer) set += value_of(peer) != notice::kNone;
      for (int peer = 0; peer < static_cast<int>(received_.size()); ++peer) {
        if (heard[static_cast<std::size_t>(peer)] || (set > completed && peer != from)) continue;
        const std::int32_t value = value_of(peer);
        if (value == notice::kNone) continue;
        heard[static_cast<std::size_t>(peer)] = true;
        if (value >= notice::kGaveUp) {
          on_gave_up_(peer, value >= notice::kLostRankBase ? value - notice::kLostRankBase : -1);
          return;
        }
      }
    }
  } catch (const std::exception& error) {
    if (std::string_view(error.what()).find("caused pair closure") != std::string_view::npos) return;
    on_broken_(error);
  }
}

void PeerWatch::tell_peers(std::int32_t value, std::chrono::milliseconds limit) {
  if (told_.exchange(true)) return;
  auto send = context_->createUnboundBuffer(&value, sizeof value);
  int sent = 0;
  for (int peer = 0; peer < context_->size; ++peer) {
    if (peer == context_->rank) continue;
    try {
      send->send(peer, watch_slot(), 0, sizeof value);
      ++sent;
    } catch (const std::exception&) {
      // that connection is broken already: nobody to tell
    }
  }
  if (limit <= std::chrono::milliseconds::zero()) return;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  try {
    for (int i = 0; i < sent; ++i) send->waitSend(deadline);
  } catch (const std::exception&) {
    // a peer that cannot take four bytes is gone or hung: it learns of this by the close
  }
}

}  // namespace ddprun::detail

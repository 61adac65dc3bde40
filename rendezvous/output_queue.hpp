#pragma once
/// OutputQueue: the bytes a store connection owes its client, in order, held without copying what
/// is large: a reply is moved in whole, and a WATCH_KEY push stays shared with every other watcher
/// of its key. Small pieces are joined into one chunk, so a write is one short gather list. Its size
/// is what the connection's budget counts (connection_budget.hpp). Pure code: no I/O.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::rendezvous {

class OutputQueue {
 public:
  /// Pieces up to this size are copied onto the end of the last chunk instead of becoming one.
  static constexpr std::size_t kJoinBytes = 4096;

  void push(std::string bytes);
  void push(std::shared_ptr<const std::string> bytes);

  std::size_t size() const { return size_; }  ///< bytes queued
  bool empty() const { return size_ == 0; }
  std::size_t chunk_count() const { return chunks_.size(); }

  /// Calls `f(std::string_view)` for each chunk, in order. The views stay valid until the queue is
  /// next changed (swap() moves the chunks, and their bytes, without moving a byte).
  template <class F>
  void for_each_chunk(F f) const {
    for (const auto& chunk : chunks_) f(chunk.view());
  }

  /// Drops everything; an idle connection keeps no chunk list.
  void clear();
  void swap(OutputQueue& other) noexcept;

 private:
  struct Chunk {
    std::string owned;
    std::shared_ptr<const std::string> shared;  ///< set: the bytes are these, `owned` is empty
    std::string_view view() const { return shared ? std::string_view(*shared) : std::string_view(owned); }
  };
  std::vector<Chunk> chunks_;
  std::size_t size_ = 0;
};

}  // namespace ddprun::rendezvous

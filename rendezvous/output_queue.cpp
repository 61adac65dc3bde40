#include "rendezvous/output_queue.hpp"

namespace ddprun::rendezvous {

void OutputQueue::push(std::string bytes) {
  if (bytes.empty()) return;
  size_ += bytes.size();
  if (bytes.size() <= kJoinBytes && !chunks_.empty() && !chunks_.back().shared &&
      chunks_.back().owned.size() < kJoinBytes) {
    chunks_.back().owned += bytes;
    return;
  }
  chunks_.push_back(Chunk{.owned = std::move(bytes), .shared = nullptr});
}

void OutputQueue::push(std::shared_ptr<const std::string> bytes) {
  if (!bytes || bytes->empty()) return;
  if (bytes->size() <= kJoinBytes) return push(std::string(*bytes));  // a wake-up byte, a small push
  size_ += bytes->size();
  chunks_.push_back(Chunk{.owned = {}, .shared = std::move(bytes)});
}

void OutputQueue::clear() {
  std::vector<Chunk>().swap(chunks_);
  size_ = 0;
}

void OutputQueue::swap(OutputQueue& other) noexcept {
  chunks_.swap(other.chunks_);
  std::swap(size_, other.size_);
}

}  // namespace ddprun::rendezvous

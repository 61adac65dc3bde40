// The bytes a store connection owes: in order, small pieces joined, large ones and shared pushes
// held without a copy.
#include "rendezvous/output_queue.hpp"

#include <gtest/gtest.h>

using namespace ddprun::rendezvous;

namespace {

std::string joined(const OutputQueue& queue) {
  std::string out;
  queue.for_each_chunk([&](std::string_view chunk) { out += chunk; });
  return out;
}

}  // namespace

TEST(OutputQueue, SmallRepliesJoinIntoOneChunkInOrder) {
  OutputQueue queue;
  queue.push(std::string("a"));
  queue.push(std::string("bc"));
  queue.push(std::make_shared<const std::string>("d"));  // a wake-up byte: copied, joined
  queue.push(std::string());                             // nothing: no chunk
  EXPECT_EQ(joined(queue), "abcd");
  EXPECT_EQ(queue.size(), 4U);
  EXPECT_EQ(queue.chunk_count(), 1U);
}

TEST(OutputQueue, ALargeReplyIsMovedInNotCopied) {
  OutputQueue queue;
  queue.push(std::string("head"));
  std::string reply(1 << 20, 'r');
  const char* bytes = reply.data();
  queue.push(std::move(reply));
  queue.push(std::string("tail"));
  EXPECT_EQ(queue.chunk_count(), 3U);
  EXPECT_EQ(queue.size(), 8U + (1 << 20));
  std::vector<const char*> starts;
  queue.for_each_chunk([&](std::string_view chunk) { starts.push_back(chunk.data()); });
  EXPECT_EQ(starts.at(1), bytes);
}

TEST(OutputQueue, ALargePushStaysSharedWithTheOtherWatchers) {
  auto push = std::make_shared<const std::string>(OutputQueue::kJoinBytes + 1, 'p');
  OutputQueue first, second;
  first.push(push);
  second.push(push);
  EXPECT_EQ(push.use_count(), 3);
  EXPECT_EQ(first.size(), push->size());
  first.for_each_chunk([&](std::string_view chunk) { EXPECT_EQ(chunk.data(), push->data()); });
}

TEST(OutputQueue, SwapMovesTheChunksWithoutMovingTheirBytes) {
  OutputQueue output, writing;
  output.push(std::string("short"));  // held inside the string object itself (small string)
  std::vector<const char*> before;
  output.for_each_chunk([&](std::string_view chunk) { before.push_back(chunk.data()); });
  writing.swap(output);
  EXPECT_TRUE(output.empty());
  EXPECT_EQ(writing.size(), 5U);
  std::vector<const char*> after;
  writing.for_each_chunk([&](std::string_view chunk) { after.push_back(chunk.data()); });
  EXPECT_EQ(after, before);  // a write in flight keeps pointing at valid bytes
  writing.clear();
  EXPECT_TRUE(writing.empty());
  EXPECT_EQ(writing.chunk_count(), 0U);
}

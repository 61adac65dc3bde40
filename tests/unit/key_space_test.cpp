// The store's semantics, without sockets: what each request replies and whom it wakes.
#include "key_space.hpp"

#include <gtest/gtest.h>

using namespace ddprun::rendezvous;
using wire::Op;
using wire::Request;

namespace {

Request req(Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {}, std::int64_t delta = 0) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.delta = delta;
  return r;
}

std::string bytes_reply(std::string_view value) {
  std::string out;
  wire::put_bytes(out, value);
  return out;
}

std::string i64_reply(std::int64_t value) {
  std::string out;
  wire::put_i64(out, value);
  return out;
}

std::string u8_reply(std::uint8_t value) { return std::string(1, static_cast<char>(value)); }

}  // namespace

TEST(KeySpace, SetGetDeleteNumKeys) {
  KeySpace keys;
  EXPECT_EQ(keys.execute(1, req(Op::set, {"/a"}, {std::string("x\0y", 3)})).reply, "");
  EXPECT_EQ(keys.execute(1, req(Op::get, {"/a"})).reply, bytes_reply(std::string("x\0y", 3)));
  EXPECT_EQ(keys.execute(1, req(Op::num_keys)).reply, i64_reply(1));
  EXPECT_EQ(keys.execute(1, req(Op::delete_key, {"/a"})).reply, i64_reply(1));
  EXPECT_EQ(keys.execute(1, req(Op::delete_key, {"/a"})).reply, i64_reply(0));
  EXPECT_EQ(keys.execute(1, req(Op::num_keys)).reply, i64_reply(0));
}

TEST(KeySpace, GetOfMissingKeyIsAProtocolViolation) {
  KeySpace keys;
  EXPECT_FALSE(keys.execute(1, req(Op::get, {"/nope"})).error.empty());
}

TEST(KeySpace, AddCountsInAsciiDecimal) {
  KeySpace keys;
  EXPECT_EQ(keys.execute(1, req(Op::add, {"/n"}, {}, 5)).reply, i64_reply(5));
  EXPECT_EQ(keys.execute(1, req(Op::add, {"/n"}, {}, -7)).reply, i64_reply(-2));
  EXPECT_EQ(keys.execute(1, req(Op::get, {"/n"})).reply, bytes_reply("-2"));
  keys.execute(1, req(Op::set, {"/text"}, {"abc"}));
  EXPECT_FALSE(keys.execute(1, req(Op::add, {"/text"}, {}, 1)).error.empty());
}

TEST(KeySpace, CompareSetInAllThreeCases) {
  KeySpace keys;
  // Missing key, non-empty expected: nothing set, the expected value comes back.
  EXPECT_EQ(keys.execute(1, req(Op::compare_set, {"/k"}, {"old", "new"})).reply, bytes_reply("old"));
  EXPECT_EQ(keys.execute(1, req(Op::num_keys)).reply, i64_reply(0));
  // Missing key, empty expected: set to desired.
  EXPECT_EQ(keys.execute(1, req(Op::compare_set, {"/k"}, {"", "first"})).reply, bytes_reply("first"));
  // Present and equal: set.
  EXPECT_EQ(keys.execute(1, req(Op::compare_set, {"/k"}, {"first", "second"})).reply, bytes_reply("second"));
  // Present and different: unchanged, current value comes back.
  EXPECT_EQ(keys.execute(1, req(Op::compare_set, {"/k"}, {"first", "third"})).reply, bytes_reply("second"));
}

TEST(KeySpace, WaitCompletesWhenTheLastKeyAppears) {
  KeySpace keys;
  keys.execute(1, req(Op::set, {"/a"}, {"1"}));
  auto wait = keys.execute(2, req(Op::wait, {"/a", "/b", "/c"}));
  EXPECT_EQ(wait.reply, "");  // not yet
  EXPECT_TRUE(keys.execute(3, req(Op::set, {"/b"}, {"1"})).deliveries.empty());
  auto last = keys.execute(3, req(Op::add, {"/c"}, {}, 1));
  ASSERT_EQ(last.deliveries.size(), 1U);
  EXPECT_EQ(last.deliveries[0].session, 2U);
  EXPECT_EQ(last.deliveries[0].bytes, u8_reply(wire::kStopWaiting));
  // A key appearing again wakes nobody: the wait is over.
  EXPECT_TRUE(keys.execute(3, req(Op::set, {"/c"}, {"2"})).deliveries.empty());
}

TEST(KeySpace, WaitOnPresentKeysRepliesAtOnce) {
  KeySpace keys;
  keys.execute(1, req(Op::set, {"/a"}, {"1"}));
  EXPECT_EQ(keys.execute(2, req(Op::wait, {"/a", "/a"})).reply, u8_reply(wire::kStopWaiting));
}

TEST(KeySpace, CheckReportsReadiness) {
  KeySpace keys;
  EXPECT_EQ(keys.execute(1, req(Op::check, {"/a"})).reply, u8_reply(wire::kCheckNotReady));
  keys.execute(1, req(Op::set, {"/a"}, {"1"}));
  EXPECT_EQ(keys.execute(1, req(Op::check, {"/a"})).reply, u8_reply(wire::kCheckReady));
}

TEST(KeySpace, CancelledWaitIsNotWokenAndRepliesCanceled) {
  KeySpace keys;
  keys.execute(2, req(Op::wait, {"/late"}));
  EXPECT_EQ(keys.execute(2, req(Op::cancel_wait)).reply, u8_reply(wire::kWaitCanceled));
  EXPECT_TRUE(keys.execute(3, req(Op::set, {"/late"}, {"1"})).deliveries.empty());
}

TEST(KeySpace, ForgottenSessionIsNotWoken) {
  KeySpace keys;
  keys.execute(2, req(Op::wait, {"/late"}));
  keys.forget(2);
  EXPECT_TRUE(keys.execute(3, req(Op::set, {"/late"}, {"1"})).deliveries.empty());
}

TEST(KeySpace, ManyAbandonedWaitsOnKeysThatNeverAppearAreSwept) {
  KeySpace keys;
  for (SessionId s = 1; s <= 20000; ++s) {
    keys.execute(s, req(Op::wait, {"/never/" + std::to_string(s)}));
    keys.forget(s);
  }
  // Behaviour stays right after the sweeps: a fresh wait is woken exactly once.
  keys.execute(99999, req(Op::wait, {"/x"}));
  auto set = keys.execute(1, req(Op::set, {"/x"}, {"1"}));
  ASSERT_EQ(set.deliveries.size(), 1U);
  EXPECT_EQ(set.deliveries[0].session, 99999U);
}

TEST(KeySpace, MultiSetWakesAndMultiGetReadsInOrder) {
  KeySpace keys;
  keys.execute(2, req(Op::wait, {"/m1", "/m2"}));
  auto set = keys.execute(1, req(Op::multi_set, {"/m1", "/m2"}, {"one", "two"}));
  ASSERT_EQ(set.deliveries.size(), 1U);
  EXPECT_EQ(keys.execute(1, req(Op::multi_get, {"/m2", "/m1"})).reply, bytes_reply("two") + bytes_reply("one"));
}

TEST(KeySpace, AppendCreatesThenExtends) {
  KeySpace keys;
  keys.execute(1, req(Op::append, {"/log"}, {"ab"}));
  keys.execute(1, req(Op::append, {"/log"}, {"cd"}));
  EXPECT_EQ(keys.execute(1, req(Op::get, {"/log"})).reply, bytes_reply("abcd"));
}

TEST(KeySpace, QueuesPushPopLenAndWakeWaiters) {
  KeySpace keys;
  EXPECT_EQ(keys.execute(1, req(Op::queue_pop, {"/q"})).reply, i64_reply(0));
  keys.execute(2, req(Op::wait, {"/q"}));
  auto push = keys.execute(1, req(Op::queue_push, {"/q"}, {"first"}));
  ASSERT_EQ(push.deliveries.size(), 1U);
  keys.execute(1, req(Op::queue_push, {"/q"}, {"second"}));
  EXPECT_EQ(keys.execute(1, req(Op::queue_len, {"/q"})).reply, i64_reply(2));
  EXPECT_EQ(keys.execute(1, req(Op::queue_pop, {"/q"})).reply, i64_reply(2) + bytes_reply("first"));
  EXPECT_EQ(keys.execute(1, req(Op::queue_pop, {"/q"})).reply, i64_reply(1) + bytes_reply("second"));
  EXPECT_EQ(keys.execute(1, req(Op::queue_len, {"/q"})).reply, i64_reply(0));
}

TEST(KeySpace, WatchKeyPushesCreatedUpdatedDeleted) {
  KeySpace keys;
  EXPECT_EQ(keys.execute(7, req(Op::watch_key, {"/w"})).reply, u8_reply(wire::kWatchRegistered));
  auto created = keys.execute(1, req(Op::set, {"/w"}, {"v1"}));
  ASSERT_EQ(created.deliveries.size(), 1U);
  EXPECT_EQ(created.deliveries[0].session, 7U);
  EXPECT_EQ(created.deliveries[0].bytes, u8_reply(1) + bytes_reply("/w") + bytes_reply("") + bytes_reply("v1"));
  auto updated = keys.execute(1, req(Op::set, {"/w"}, {"v2"}));
  EXPECT_EQ(updated.deliveries.at(0).bytes, u8_reply(0) + bytes_reply("/w") + bytes_reply("v1") + bytes_reply("v2"));
  auto deleted = keys.execute(1, req(Op::delete_key, {"/w"}));
  EXPECT_EQ(deleted.deliveries.at(0).bytes, u8_reply(2) + bytes_reply("/w") + bytes_reply("v2") + bytes_reply(""));
  keys.forget(7);
  EXPECT_TRUE(keys.execute(1, req(Op::set, {"/w"}, {"v3"})).deliveries.empty());
}

TEST(KeySpace, ClearEmptiesEverything) {
  KeySpace keys;
  keys.execute(1, req(Op::set, {"/a"}, {"1"}));
  keys.execute(2, req(Op::wait, {"/b"}));
  keys.clear();
  EXPECT_EQ(keys.key_count(), 0U);
  EXPECT_TRUE(keys.execute(1, req(Op::set, {"/b"}, {"1"})).deliveries.empty());
}

TEST(KeySpace, QueuePushWakesOneWaiterInArrivalOrder) {
  KeySpace keys;
  keys.execute(2, req(Op::wait, {"/q"}));
  keys.execute(3, req(Op::wait, {"/q"}));
  auto first = keys.execute(1, req(Op::queue_push, {"/q"}, {"a"}));
  ASSERT_EQ(first.deliveries.size(), 1U);
  EXPECT_EQ(first.deliveries[0].session, 2U);
  auto second = keys.execute(1, req(Op::queue_push, {"/q"}, {"b"}));
  ASSERT_EQ(second.deliveries.size(), 1U);
  EXPECT_EQ(second.deliveries[0].session, 3U);
}

TEST(KeySpace, WatchedAppendPushesOnlyTheAppendedBytes) {
  KeySpace keys;
  keys.execute(1, req(Op::set, {"/log"}, {"ab"}));
  keys.execute(7, req(Op::watch_key, {"/log"}));
  auto append = keys.execute(1, req(Op::append, {"/log"}, {"cd"}));
  ASSERT_EQ(append.deliveries.size(), 1U);
  EXPECT_EQ(append.deliveries[0].bytes,
            u8_reply(wire::kWatchKeyAppended) + bytes_reply("/log") + bytes_reply("") + bytes_reply("cd"));
}

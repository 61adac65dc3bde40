// The store's semantics, without sockets: what each request replies and whom it wakes.
#include "rendezvous/key_space.hpp"

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
  EXPECT_EQ(*last.deliveries[0].bytes, u8_reply(wire::kStopWaiting));
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
  EXPECT_EQ(*created.deliveries[0].bytes, u8_reply(1) + bytes_reply("/w") + bytes_reply("") + bytes_reply("v1"));
  auto updated = keys.execute(1, req(Op::set, {"/w"}, {"v2"}));
  EXPECT_EQ(*updated.deliveries.at(0).bytes, u8_reply(0) + bytes_reply("/w") + bytes_reply("v1") + bytes_reply("v2"));
  auto deleted = keys.execute(1, req(Op::delete_key, {"/w"}));
  EXPECT_EQ(*deleted.deliveries.at(0).bytes, u8_reply(2) + bytes_reply("/w") + bytes_reply("v2") + bytes_reply(""));
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
  EXPECT_EQ(*append.deliveries[0].bytes,
            u8_reply(wire::kWatchKeyAppended) + bytes_reply("/log") + bytes_reply("") + bytes_reply("cd"));
}

TEST(KeySpace, AppendPastMaxValueBytesIsRefusedAndChangesNothing) {
  KeySpace keys(wire::Limits{.max_value_bytes = 8});
  keys.execute(1, req(Op::set, {"/a"}, {"12345"}));
  EXPECT_TRUE(keys.execute(1, req(Op::append, {"/a"}, {"678"})).error.empty());  // exactly the limit
  EXPECT_FALSE(keys.execute(1, req(Op::append, {"/a"}, {"9"})).error.empty());
  EXPECT_EQ(keys.execute(1, req(Op::get, {"/a"})).reply, bytes_reply("12345678"));
  EXPECT_FALSE(keys.execute(1, req(Op::append, {"/new"}, {"123456789"})).error.empty());
  EXPECT_EQ(keys.execute(1, req(Op::check, {"/new"})).reply, u8_reply(wire::kCheckNotReady));
}

TEST(KeySpace, WatchingTheSameKeyAgainRegistersItOnce) {
  KeySpace keys;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(keys.execute(7, req(Op::watch_key, {"/w"})).reply, u8_reply(wire::kWatchRegistered));
  }
  EXPECT_EQ(keys.execute(1, req(Op::set, {"/w"}, {"v"})).deliveries.size(), 1U);
}

TEST(KeySpace, OneSessionWatchesAtMostKMaxWatchedKeys) {
  KeySpace keys;
  for (std::size_t i = 0; i < KeySpace::kMaxWatchedKeys; ++i) {
    ASSERT_TRUE(keys.execute(7, req(Op::watch_key, {"/w" + std::to_string(i)})).error.empty()) << i;
  }
  EXPECT_FALSE(keys.execute(7, req(Op::watch_key, {"/one-more"})).error.empty());
  EXPECT_TRUE(keys.execute(7, req(Op::watch_key, {"/w0"})).error.empty());  // already watched
  EXPECT_TRUE(keys.execute(8, req(Op::watch_key, {"/one-more"})).error.empty());  // another session's own count
  auto set = keys.execute(1, req(Op::set, {"/one-more"}, {"v"}));
  ASSERT_EQ(set.deliveries.size(), 1U);
  EXPECT_EQ(set.deliveries[0].session, 8U);
}

TEST(KeySpace, OnePushIsSharedByEveryWatcher) {
  KeySpace keys;
  keys.execute(7, req(Op::watch_key, {"/w"}));
  keys.execute(8, req(Op::watch_key, {"/w"}));
  auto set = keys.execute(1, req(Op::set, {"/w"}, {std::string(1000, 'v')}));
  ASSERT_EQ(set.deliveries.size(), 2U);
  EXPECT_EQ(set.deliveries[0].bytes, set.deliveries[1].bytes);  // the same bytes, not two copies
}

namespace {

/// /a = "xyz", /n = "5", queue /q = ["first"]; session 9 waits for /never.
KeySpace prepared() {
  KeySpace keys;
  keys.execute(1, req(Op::set, {"/a"}, {"xyz"}));
  keys.execute(1, req(Op::set, {"/n"}, {"5"}));
  keys.execute(1, req(Op::queue_push, {"/q"}, {"first"}));
  keys.execute(9, req(Op::wait, {"/never"}));
  return keys;
}

struct ReplySizeCase {
  const char* name;
  Request request;
  std::size_t bytes;
  bool replied_now = true;  ///< false: a WAIT answered later; its byte is counted all the same
};

}  // namespace

TEST(KeySpace, ReplyBytesIsTheSizeOfTheReplyBeforeItIsBuilt) {
  Request ping = req(Op::ping);
  ping.number = 7;
  const std::vector<ReplySizeCase> cases = {
      {"PING", ping, 4},
      {"SET", req(Op::set, {"/s"}, {"hello"}), 0},
      {"GET", req(Op::get, {"/a"}), 8 + 3},
      {"GET of a missing key (refused)", req(Op::get, {"/missing"}), 0},
      {"COMPARE_SET that swaps", req(Op::compare_set, {"/a"}, {"xyz", "longer!"}), 8 + 7},
      {"COMPARE_SET that does not", req(Op::compare_set, {"/a"}, {"nope", "d"}), 8 + 3},
      {"COMPARE_SET that creates", req(Op::compare_set, {"/missing"}, {"", "new"}), 8 + 3},
      {"COMPARE_SET of a missing key, expected", req(Op::compare_set, {"/missing"}, {"exp!", "d"}), 8 + 4},
      {"ADD", req(Op::add, {"/n"}, {}, 1), 8},
      {"CHECK", req(Op::check, {"/a", "/missing"}), 1},
      {"WAIT on present keys", req(Op::wait, {"/a"}), 1},
      {"WAIT on a missing key", req(Op::wait, {"/missing"}), 1, false},
      {"CANCEL_WAIT", req(Op::cancel_wait), 1},
      {"GETNUMKEYS", req(Op::num_keys), 8},
      {"DELETE_KEY", req(Op::delete_key, {"/a"}), 8},
      {"APPEND", req(Op::append, {"/a"}, {"more"}), 0},
      {"MULTI_GET", req(Op::multi_get, {"/a", "/a", "/n"}), (8 + 3) * 2 + 8 + 1},
      {"MULTI_SET", req(Op::multi_set, {"/x", "/y"}, {"1", "2"}), 0},
      {"QUEUE_PUSH", req(Op::queue_push, {"/q"}, {"second"}), 0},
      {"QUEUE_POP", req(Op::queue_pop, {"/q"}), 8 + 8 + 5},
      {"QUEUE_POP of an empty queue", req(Op::queue_pop, {"/empty"}), 8},
      {"QUEUE_LEN", req(Op::queue_len, {"/q"}), 8},
      {"WATCH_KEY", req(Op::watch_key, {"/a"}), 1},
  };
  for (const auto& c : cases) {
    KeySpace keys = prepared();
    EXPECT_EQ(keys.reply_bytes(c.request), c.bytes) << c.name;
    KeySpace::Outcome outcome = keys.execute(9, c.request);
    if (outcome.error.empty()) {
      EXPECT_EQ(outcome.reply.size(), c.replied_now ? c.bytes : 0) << c.name;
    }
  }
}

TEST(KeySpace, ReplyBytesOfAnAmplifyingMultiGetIsCountedNotBuilt) {
  KeySpace keys;
  keys.execute(1, req(Op::set, {"/big"}, {std::string(1 << 20, 'b')}));
  Request multi_get = req(Op::multi_get, std::vector<std::string>(400, "/big"));
  EXPECT_EQ(keys.reply_bytes(multi_get), 400 * ((1 << 20) + 8U));
}

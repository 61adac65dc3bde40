// wire::decode_reply by table: the reply of every op a client reads, whole (complete, exactly its
// bytes consumed), cut anywhere (need_more, pointing past the cut), followed by the next reply's
// bytes (left alone), and every malformed reply (invalid, with the message a client shows).
#include <gtest/gtest.h>

#include "rendezvous/wire.hpp"
#include "tests/unit/counting_new.hpp"
#include "tests/unit/wire_bytes.hpp"

namespace ddprun::rendezvous::wire {
namespace {

using ddprun::testing::allocated_bytes;
using ddprun::testing::Bytes;
using ddprun::testing::bytes_of;
using ddprun::testing::field;
using ddprun::testing::i64;
using ddprun::testing::u32;
using ddprun::testing::u64;
using ddprun::testing::u8;

Reply reply(std::int64_t number, std::vector<std::string> values = {}) { return Reply{number, std::move(values)}; }

struct Row {
  const char* name;
  Op op;
  std::size_t keys;  // MULTI_GET's
  std::string bytes;
  Reply expected;
};

/// One reply of every kind a client reads, with awkward contents (empty values, NUL bytes,
/// negative and extreme numbers).
std::vector<Row> every_reply() {
  const std::string nul("a\0b", 3);
  return {
      {"SET has no reply", Op::set, 0, "", reply(0)},
      {"APPEND has no reply", Op::append, 0, "", reply(0)},
      {"MULTI_SET has no reply", Op::multi_set, 0, "", reply(0)},
      {"QUEUE_PUSH has no reply", Op::queue_push, 0, "", reply(0)},
      {"VALIDATE has no reply", Op::validate, 0, "", reply(0)},
      {"GET", Op::get, 0, field(nul), reply(0, {nul})},
      {"GET of an empty value", Op::get, 0, field(""), reply(0, {""})},
      {"COMPARE_SET", Op::compare_set, 0, field("now"), reply(0, {"now"})},
      {"ADD", Op::add, 0, i64(-2), reply(-2)},
      {"ADD at the top", Op::add, 0, i64(INT64_MAX), reply(INT64_MAX)},
      {"GETNUMKEYS", Op::num_keys, 0, i64(7), reply(7)},
      {"DELETE_KEY", Op::delete_key, 0, i64(1), reply(1)},
      {"QUEUE_LEN", Op::queue_len, 0, i64(0), reply(0)},
      {"CHECK ready", Op::check, 0, u8(kCheckReady), reply(kCheckReady)},
      {"CHECK not ready", Op::check, 0, u8(kCheckNotReady), reply(kCheckNotReady)},
      {"WAIT", Op::wait, 0, u8(kStopWaiting), reply(kStopWaiting)},
      {"CANCEL_WAIT", Op::cancel_wait, 0, u8(kWaitCanceled), reply(kWaitCanceled)},
      {"WATCH_KEY", Op::watch_key, 0, u8(kWatchRegistered), reply(kWatchRegistered)},
      {"PING", Op::ping, 0, u32(0xDEADBEEF), reply(0xDEADBEEF)},
      {"MULTI_GET of three", Op::multi_get, 3, field("1") + field("") + field(nul), reply(0, {"1", "", nul})},
      {"MULTI_GET of none", Op::multi_get, 0, "", reply(0)},
      {"QUEUE_POP of an item", Op::queue_pop, 0, i64(2) + field("job"), reply(2, {"job"})},
      {"QUEUE_POP of an empty queue", Op::queue_pop, 0, i64(0), reply(0)},
      {"AUTH_CHALLENGE", Op::auth_challenge, 0, field(std::string(32, '\x07')), reply(0, {std::string(32, '\x07')})},
      {"AUTH_RESPONSE", Op::auth_response, 0, u8(1) + field(std::string(32, '\x09')), reply(1, {std::string(32, '\x09')})},
  };
}

DecodedReply decode(const Row& row, const std::string& bytes, const Limits& limits = {}) {
  const Bytes input = bytes_of(bytes);
  return decode_reply(row.op, input, limits, row.keys);
}

TEST(WireReply, EveryReplyWholeIsCompleteAndConsumesExactlyItsBytes) {
  for (const Row& row : every_reply()) {
    DecodedReply d = decode(row, row.bytes);
    ASSERT_EQ(d.status, DecodeStatus::complete) << row.name << ": " << d.error;
    EXPECT_EQ(d.consumed, row.bytes.size()) << row.name;
    EXPECT_EQ(d.reply, row.expected) << row.name;
  }
}

TEST(WireReply, EveryProperPrefixNeedsMoreAndSaysHowMuch) {
  for (const Row& row : every_reply()) {
    for (std::size_t cut = 0; cut < row.bytes.size(); ++cut) {
      DecodedReply d = decode(row, row.bytes.substr(0, cut));
      ASSERT_EQ(d.status, DecodeStatus::need_more) << row.name << " cut at " << cut;
      EXPECT_EQ(d.consumed, 0u) << row.name;
      EXPECT_GT(d.need_at_least, cut) << row.name << " cut at " << cut;
      EXPECT_LE(d.need_at_least, row.bytes.size()) << row.name << " cut at " << cut;
    }
  }
}

TEST(WireReply, TheNextRepliesBytesAreLeftAlone) {
  for (const Row& row : every_reply()) {
    DecodedReply d = decode(row, row.bytes + i64(42) + "more");
    ASSERT_EQ(d.status, DecodeStatus::complete) << row.name;
    EXPECT_EQ(d.consumed, row.bytes.size()) << row.name;
    EXPECT_EQ(d.reply, row.expected) << row.name;
  }
}

TEST(WireReply, MalformedRepliesAreInvalidWithTheClientsWords) {
  Limits limits;
  limits.max_value_bytes = 8;
  struct Bad {
    Op op;
    std::size_t keys;
    std::string bytes;
    std::string error;
  };
  const std::vector<Bad> table = {
      {Op::check, 0, u8(7), "CHECK reply 7"},
      {Op::wait, 0, u8(1), "WAIT reply 1 where 0 was expected"},
      {Op::cancel_wait, 0, u8(0), "CANCEL_WAIT reply 0 where 1 was expected"},
      {Op::watch_key, 0, u8(0), "WATCH_KEY reply 0 where 3 was expected"},
      {Op::auth_response, 0, u8(0), "AUTH_RESPONSE reply 0 where 1 was expected"},
      // Lengths are held to the limit as soon as they arrive, before any of the value.
      {Op::get, 0, u64(9), "a value of 9 bytes, over the limit of 8"},
      {Op::compare_set, 0, u64(~std::uint64_t{0}), "a value of 18446744073709551615 bytes, over the limit of 8"},
      {Op::multi_get, 2, field("ok") + u64(100), "a value of 100 bytes, over the limit of 8"},
      {Op::queue_pop, 0, i64(1) + u64(9), "a value of 9 bytes, over the limit of 8"},
      {Op::auth_challenge, 0, u64(kMaxAuthReplyBytes + 1), "a value of 1025 bytes, over the limit of 1024"},
      {Op::auth_response, 0, u8(1) + u64(5000), "a value of 5000 bytes, over the limit of 1024"},
  };
  for (const Bad& bad : table) {
    const Bytes input = bytes_of(bad.bytes);
    DecodedReply d = decode_reply(bad.op, input, limits, bad.keys);
    EXPECT_EQ(d.status, DecodeStatus::invalid) << bad.error;
    EXPECT_EQ(d.error, bad.error);
    EXPECT_EQ(d.consumed, 0u) << bad.error;
  }
}

TEST(WireReply, AuthRepliesAreHeldToTheAuthLimitNotTheValueLimit) {
  const Bytes nonce = bytes_of(field(std::string(kMaxAuthReplyBytes, 'n')));
  EXPECT_EQ(decode_reply(Op::auth_challenge, nonce, Limits{}).status, DecodeStatus::complete);
}

TEST(WireReply, AClaimedLengthDoesNotBecomeAnAllocation) {
  // A GET reply claiming 8 MiB (the default limit), with 100 bytes of it present.
  const Bytes input = bytes_of(u64(Limits{}.max_value_bytes) + std::string(100, 'x'));
  const std::size_t before = allocated_bytes();
  DecodedReply d = decode_reply(Op::get, input, Limits{});
  const std::size_t allocated = allocated_bytes() - before;
  EXPECT_EQ(d.status, DecodeStatus::need_more);
  EXPECT_EQ(d.need_at_least, 8 + Limits{}.max_value_bytes);
  EXPECT_LT(allocated, 1024u);
  // A MULTI_GET of many keys, nothing of it present: no room reserved for the values.
  const std::size_t before_many = allocated_bytes();
  EXPECT_EQ(decode_reply(Op::multi_get, {}, Limits{}, 100000).status, DecodeStatus::need_more);
  EXPECT_LT(allocated_bytes() - before_many, 1024u);
}

}  // namespace
}  // namespace ddprun::rendezvous::wire

// What one store connection may hold, and when a request may run: the pure rules StoreConnection
// applies before executing each request.
#include "rendezvous/connection_budget.hpp"

#include <gtest/gtest.h>

#include <cstdint>

using namespace ddprun::rendezvous;

namespace {

constexpr std::size_t kMiB = 1 << 20;

wire::Request request(wire::Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  wire::Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return r;
}

}  // namespace

TEST(ConnectionBudget, AdmitRunsWaitsOrRefuses) {
  struct Case {
    std::size_t unsent, reply, max;
    Admission expected;
  };
  const Case cases[] = {
      {0, 0, 16, Admission::run},         {0, 16, 16, Admission::run},          {10, 6, 16, Admission::run},
      {16, 0, 16, Admission::run},        {10, 7, 16, Admission::wait},         {16, 1, 16, Admission::wait},
      {0, 17, 16, Admission::never},      {10, 17, 16, Admission::never},       {0, SIZE_MAX, 16, Admission::never},
      {SIZE_MAX, 1, SIZE_MAX, Admission::wait},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(admit(c.unsent, c.reply, c.max), c.expected) << c.unsent << " unsent, reply " << c.reply << ", max " << c.max;
  }
}

TEST(ConnectionBudget, TheOpenBudgetFitsTheLargestGetAndPushTheLimitsAllow) {
  wire::Limits defaults;
  // A WATCH_KEY push: type, then key, old and new value as length-prefixed fields.
  const std::size_t push = 1 + 3 * 8 + defaults.max_key_bytes + 2 * defaults.max_value_bytes;
  EXPECT_EQ(largest_single_reply_bytes(defaults), push);
  ConnectionBudget open = open_budget(defaults);
  EXPECT_EQ(open.max_unsent_bytes, push);  // a little over 16 MiB under the default limits
  EXPECT_EQ(open.max_input_bytes, defaults.max_request_bytes + kReadStepBytes);
  EXPECT_EQ(open.limits.max_value_bytes, defaults.max_value_bytes);  // the decoder's limits are the store's
  EXPECT_EQ(open.limits.max_request_bytes, defaults.max_request_bytes);

  wire::Limits small{.max_value_bytes = 1024};
  EXPECT_EQ(open_budget(small).max_unsent_bytes, 16 * kMiB);

  wire::Limits absurd{.max_key_bytes = SIZE_MAX, .max_value_bytes = SIZE_MAX, .max_request_bytes = SIZE_MAX};
  EXPECT_EQ(open_budget(absurd).max_unsent_bytes, SIZE_MAX);  // saturates, never wraps
  EXPECT_EQ(open_budget(absurd).max_input_bytes, SIZE_MAX);
}

TEST(ConnectionBudget, BeforeAuthenticationAPeerGetsAFewKib) {
  ConnectionBudget before = unauthenticated_budget(wire::Limits{});
  EXPECT_EQ(before.max_unsent_bytes, 4096U);
  EXPECT_EQ(before.max_input_bytes, 4096U);
  EXPECT_LE(before.limits.max_request_bytes, before.max_input_bytes);
  wire::Limits tight{.max_key_bytes = 16};
  EXPECT_EQ(unauthenticated_budget(tight).limits.max_key_bytes, 16U);  // the tighter limit stays
}

TEST(ConnectionBudget, TheUnauthenticatedDecoderTakesTheHandshakeAndNothingBigger) {
  const wire::Limits limits = unauthenticated_budget(wire::Limits{}).limits;
  auto decode = [&](const wire::Request& r) {
    std::string bytes = wire::encode_request(wire::Dialect::current, r);
    return wire::decode_request(wire::Dialect::current,
                                std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), limits)
        .status;
  };
  EXPECT_EQ(decode(request(wire::Op::validate)), wire::DecodeStatus::complete);
  EXPECT_EQ(decode(request(wire::Op::ping)), wire::DecodeStatus::complete);
  EXPECT_EQ(decode(request(wire::Op::auth_challenge)), wire::DecodeStatus::complete);
  EXPECT_EQ(decode(request(wire::Op::auth_response, {}, {std::string(32, 'p'), std::string(32, 'n')})),
            wire::DecodeStatus::complete);
  EXPECT_EQ(decode(request(wire::Op::set, {std::string(100, 'k')}, {"v"})), wire::DecodeStatus::invalid);
  EXPECT_EQ(decode(request(wire::Op::set, {"/k"}, {std::string(100, 'v')})), wire::DecodeStatus::invalid);
}

TEST(ConnectionBudget, ReplyBytesCountsTheHandshakeAndAsksTheKeySpaceForTheRest) {
  KeySpace keys;
  keys.execute(1, request(wire::Op::set, {"/a"}, {"xyz"}));
  EXPECT_EQ(reply_bytes(keys, request(wire::Op::validate)), 0U);
  EXPECT_EQ(reply_bytes(keys, request(wire::Op::auth_challenge)), 8U + 32);   // the nonce as bytes
  EXPECT_EQ(reply_bytes(keys, request(wire::Op::auth_response)), 1U + 8 + 32);  // u8 1, the proof as bytes
  EXPECT_EQ(reply_bytes(keys, request(wire::Op::ping)), 4U);
  EXPECT_EQ(reply_bytes(keys, request(wire::Op::get, {"/a"})), 8U + 3);
}

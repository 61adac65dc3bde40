// The TCPStore byte codec: byte-exact PyTorch requests, round trips of every op in both dialects,
// partial input, limits, and that a peer's claimed lengths never turn into allocations.
#include "rendezvous/wire.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/unit/counting_new.hpp"
#include "tests/unit/wire_bytes.hpp"

namespace ddprun::rendezvous::wire {
namespace {

using ddprun::testing::allocated_bytes;
using ddprun::testing::Bytes;
using ddprun::testing::bytes_of;
using ddprun::testing::u64;

Bytes hex(std::initializer_list<int> values) {
  Bytes out;
  for (int v : values) out.push_back(static_cast<std::uint8_t>(v));
  return out;
}

Request make(Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {},
             std::int64_t delta = 0, std::uint32_t number = 0) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.delta = delta;
  r.number = number;
  return r;
}

/// One request of every op, with awkward contents (empty fields, NUL bytes, negative delta).
std::vector<Request> every_op() {
  return {
      make(Op::validate, {}, {}, 0, kValidationMagic),
      make(Op::set, {"/foo"}, {"bar"}),
      make(Op::set, {""}, {""}),
      make(Op::compare_set, {"/k"}, {"", std::string("new\0val", 7)}),
      make(Op::get, {"/k"}),
      make(Op::add, {"init/"}, {}, 1),
      make(Op::add, {"/c"}, {}, -9'000'000'000LL),
      make(Op::check, {"/a", "/b", ""}),
      make(Op::check, {}),
      make(Op::wait, {"/a"}),
      make(Op::num_keys),
      make(Op::watch_key, {"/watched"}),
      make(Op::delete_key, {"/k"}),
      make(Op::append, {"/log"}, {"line\n"}),
      make(Op::multi_get, {"/a", "/b"}),
      make(Op::multi_set, {"/a", "/b"}, {"1", ""}),
      make(Op::multi_set, {}, {}),
      make(Op::cancel_wait),
      make(Op::ping, {}, {}, 0, 0xDEADBEEF),
      make(Op::queue_push, {"/q"}, {"item"}),
      make(Op::queue_pop, {"/q"}),
      make(Op::queue_len, {"/q"}),
      make(Op::auth_challenge),
      make(Op::auth_response, {}, {std::string(32, '\x01'), std::string(16, '\x02')}),
  };
}

bool in_dialect(Dialect dialect, Op op) { return op_code(dialect, op).has_value(); }

Decoded decode(Dialect dialect, const Bytes& bytes, const Limits& limits = {}) {
  return decode_request(dialect, bytes, limits);
}

// --- Byte-exact against PyTorch ---------------------------------------------------------------

TEST(Wire, DecodesTheBytesOfA113ClientSet) {
  // Captured from python3-torch 1.13.1: TCPStore(...).set("foo", "bar").
  Bytes captured = hex({0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0x2f, 0x66, 0x6f, 0x6f,
                        0x03, 0, 0, 0, 0, 0, 0, 0, 0x62, 0x61, 0x72});
  ASSERT_EQ(detect_dialect(captured), Dialect::legacy);
  Decoded d = decode(Dialect::legacy, captured);
  ASSERT_EQ(d.status, DecodeStatus::complete) << d.error;
  EXPECT_EQ(d.consumed, captured.size());
  EXPECT_EQ(d.request, make(Op::set, {"/foo"}, {"bar"}));
  EXPECT_EQ(bytes_of(encode_request(Dialect::legacy, d.request)), captured);
}

TEST(Wire, ValidateAndPingHaveTheDocumentedBytes) {
  EXPECT_EQ(bytes_of(encode_request(Dialect::current, make(Op::validate))),
            hex({0x00, 0xCE, 0xF7, 0x85, 0x3C}));
  EXPECT_EQ(bytes_of(encode_request(Dialect::current, make(Op::ping, {}, {}, 0, 0x01020304))),
            hex({13, 0x04, 0x03, 0x02, 0x01}));
}

TEST(Wire, CodesMatchPyTorchsQueryTypeEnums) {
  const std::vector<std::pair<Op, int>> legacy = {
      {Op::set, 0}, {Op::compare_set, 1}, {Op::get, 2}, {Op::add, 3}, {Op::check, 4},
      {Op::wait, 5}, {Op::num_keys, 6}, {Op::watch_key, 7}, {Op::delete_key, 8}, {Op::append, 9},
      {Op::multi_get, 10}, {Op::multi_set, 11}, {Op::cancel_wait, 12}};
  for (auto [op, code] : legacy) EXPECT_EQ(op_code(Dialect::legacy, op), code) << op_name(op);
  const std::vector<std::pair<Op, int>> current = {
      {Op::validate, 0}, {Op::set, 1}, {Op::compare_set, 2}, {Op::get, 3}, {Op::add, 4},
      {Op::check, 5}, {Op::wait, 6}, {Op::num_keys, 7}, {Op::delete_key, 8}, {Op::append, 9},
      {Op::multi_get, 10}, {Op::multi_set, 11}, {Op::cancel_wait, 12}, {Op::ping, 13},
      {Op::queue_push, 14}, {Op::queue_pop, 15}, {Op::queue_len, 16}, {Op::auth_challenge, 64},
      {Op::auth_response, 65}};
  for (auto [op, code] : current) EXPECT_EQ(op_code(Dialect::current, op), code) << op_name(op);
  for (Op op : {Op::validate, Op::ping, Op::queue_push, Op::queue_pop, Op::queue_len,
                Op::auth_challenge, Op::auth_response}) {
    EXPECT_FALSE(op_code(Dialect::legacy, op)) << op_name(op);
  }
  EXPECT_FALSE(op_code(Dialect::current, Op::watch_key));
}

TEST(Wire, FieldLayoutsOfCountsAndIntegers) {
  // CHECK: u64 count then length-prefixed keys; ADD: key then i64 delta; MULTI_SET: 8-byte count.
  EXPECT_EQ(encode_request(Dialect::current, make(Op::check, {"/a"})),
            std::string("\x05", 1) + u64(1) + u64(2) + "/a");
  EXPECT_EQ(encode_request(Dialect::legacy, make(Op::add, {"/c"}, {}, -1)),
            std::string("\x03", 1) + u64(2) + "/c" + std::string(8, '\xff'));
  EXPECT_EQ(encode_request(Dialect::current, make(Op::multi_set, {"k"}, {"v"})),
            std::string("\x0b", 1) + u64(1) + u64(1) + "k" + u64(1) + "v");
}

TEST(Wire, WatchPushMatchesA113Server) {
  // Captured from a python3-torch 1.13.1 server after WATCH_KEY "/k" then set("k", "v1").
  Bytes created = hex({0x01, 0x02, 0, 0, 0, 0, 0, 0, 0, 0x2f, 0x6b, 0, 0, 0, 0, 0, 0, 0, 0,
                       0x02, 0, 0, 0, 0, 0, 0, 0, 0x76, 0x31});
  EXPECT_EQ(bytes_of(encode_watch_push(kWatchKeyCreated, "/k", "", "v1")), created);
  // ... then set("k", "v2"): KEY_UPDATED with the old and the new value.
  EXPECT_EQ(encode_watch_push(kWatchKeyUpdated, "/k", "v1", "v2"),
            std::string("\x00", 1) + u64(2) + "/k" + u64(2) + "v1" + u64(2) + "v2");
  EXPECT_EQ(kWatchRegistered, 3);
  EXPECT_EQ(kWatchKeyDeleted, 2);
}

// --- Round trips -----------------------------------------------------------------------------

TEST(Wire, EveryOpRoundTripsInEachDialectThatHasIt) {
  for (Dialect dialect : {Dialect::legacy, Dialect::current}) {
    for (const Request& request : every_op()) {
      SCOPED_TRACE(std::string(op_name(request.op)) +
                   (dialect == Dialect::legacy ? " legacy" : " current"));
      if (!in_dialect(dialect, request.op)) {
        EXPECT_THROW(encode_request(dialect, request), std::invalid_argument);
        continue;
      }
      Bytes encoded = bytes_of(encode_request(dialect, request));
      EXPECT_EQ(encoded[0], *op_code(dialect, request.op));
      Decoded d = decode(dialect, encoded);
      ASSERT_EQ(d.status, DecodeStatus::complete) << d.error;
      EXPECT_EQ(d.consumed, encoded.size());
      EXPECT_EQ(d.request, request);
    }
  }
}

TEST(Wire, EncodeRejectsRequestsOfTheWrongShape) {
  EXPECT_THROW(encode_request(Dialect::current, make(Op::set, {"/k"})), std::invalid_argument);
  EXPECT_THROW(encode_request(Dialect::current, make(Op::get)), std::invalid_argument);
  EXPECT_THROW(encode_request(Dialect::current, make(Op::multi_set, {"a", "b"}, {"1"})),
               std::invalid_argument);
  EXPECT_THROW(encode_request(Dialect::legacy, make(Op::ping)), std::invalid_argument);
  EXPECT_THROW(encode_request(Dialect::current, make(Op::watch_key, {"/k"})), std::invalid_argument);
}

TEST(Wire, EveryProperPrefixNeedsMore) {
  for (Dialect dialect : {Dialect::legacy, Dialect::current}) {
    for (const Request& request : every_op()) {
      if (!in_dialect(dialect, request.op)) continue;
      SCOPED_TRACE(op_name(request.op));
      Bytes encoded = bytes_of(encode_request(dialect, request));
      for (std::size_t n = 0; n < encoded.size(); ++n) {
        Bytes prefix(encoded.begin(), encoded.begin() + static_cast<std::ptrdiff_t>(n));
        Decoded d = decode(dialect, prefix);
        ASSERT_EQ(d.status, DecodeStatus::need_more) << "prefix of " << n << ": " << d.error;
        EXPECT_EQ(d.consumed, 0u);
        EXPECT_GT(d.need_at_least, n);
        EXPECT_LE(d.need_at_least, encoded.size());
      }
    }
  }
}

TEST(Wire, DecodesOneRequestAtATimeFromAStream) {
  std::string stream = encode_request(Dialect::current, make(Op::validate)) +
                       encode_request(Dialect::current, make(Op::ping, {}, {}, 0, 7)) +
                       encode_request(Dialect::current, make(Op::add, {"init/"}, {}, 1));
  Bytes all = bytes_of(stream);
  std::span<const std::uint8_t> rest(all);
  std::vector<Op> ops;
  while (!rest.empty()) {
    Decoded d = decode_request(Dialect::current, rest, {});
    ASSERT_EQ(d.status, DecodeStatus::complete) << d.error;
    ops.push_back(d.request.op);
    rest = rest.subspan(d.consumed);
  }
  EXPECT_EQ(ops, (std::vector<Op>{Op::validate, Op::ping, Op::add}));
}

// --- Invalid input ---------------------------------------------------------------------------

TEST(Wire, UnknownCodesAreInvalid) {
  for (int code : {13, 14, 16, 64, 65, 255}) {
    Decoded d = decode(Dialect::legacy, hex({code}));
    EXPECT_EQ(d.status, DecodeStatus::invalid) << code;
    EXPECT_NE(d.error.find("unknown request code " + std::to_string(code)), std::string::npos) << d.error;
  }
  for (int code : {17, 63, 66, 128, 255}) {
    Decoded d = decode(Dialect::current, hex({code}));
    EXPECT_EQ(d.status, DecodeStatus::invalid) << code;
    EXPECT_NE(d.error.find("current"), std::string::npos) << d.error;
  }
  // Code 7 is WATCH_KEY only in legacy; in current it is GETNUMKEYS.
  EXPECT_EQ(decode(Dialect::current, hex({7})).request.op, Op::num_keys);
}

TEST(Wire, ValidateWithTheWrongMagicIsInvalid) {
  Decoded d = decode(Dialect::current, hex({0x00, 0xCE, 0xF7, 0x85, 0x3D}));
  EXPECT_EQ(d.status, DecodeStatus::invalid);
  EXPECT_NE(d.error.find("VALIDATE"), std::string::npos) << d.error;
}

TEST(Wire, OversizedKeyIsInvalidAsSoonAsItsLengthArrives) {
  Limits limits;
  std::string head = std::string("\x03", 1) + u64(limits.max_key_bytes + 1);  // GET, no key yet
  Decoded d = decode(Dialect::current, bytes_of(head), limits);
  EXPECT_EQ(d.status, DecodeStatus::invalid);
  EXPECT_NE(d.error.find("GET: key of 8193 bytes exceeds the limit of 8192"), std::string::npos) << d.error;
  // At the limit it merely waits for the key.
  head = std::string("\x03", 1) + u64(limits.max_key_bytes);
  EXPECT_EQ(decode(Dialect::current, bytes_of(head), limits).status, DecodeStatus::need_more);
}

TEST(Wire, OversizedValueIsInvalidBeforeItsBody) {
  Limits limits;
  std::string head = std::string("\x00", 1) + u64(2) + "/k" + u64(limits.max_value_bytes + 1);
  Decoded d = decode(Dialect::legacy, bytes_of(head), limits);
  EXPECT_EQ(d.status, DecodeStatus::invalid);
  EXPECT_NE(d.error.find("SET: value"), std::string::npos) << d.error;
  // COMPARE_SET's desired value has the same limit.
  head = std::string("\x02", 1) + u64(2) + "/k" + u64(0) + u64(std::uint64_t{1} << 63);
  EXPECT_EQ(decode(Dialect::current, bytes_of(head), limits).status, DecodeStatus::invalid);
}

TEST(Wire, TooManyKeysIsInvalidBeforeAnyKey) {
  Limits limits;
  for (int code : {5, 6, 10, 11}) {  // CHECK, WAIT, MULTI_GET, MULTI_SET (current codes)
    std::string head = std::string(1, static_cast<char>(code)) + u64(limits.max_keys_per_request + 1);
    Decoded d = decode(Dialect::current, bytes_of(head), limits);
    EXPECT_EQ(d.status, DecodeStatus::invalid) << code;
    EXPECT_NE(d.error.find("key count"), std::string::npos) << d.error;
  }
  // MULTI_SET sends its count as an i64: a negative count is invalid and named as such.
  Decoded d = decode(Dialect::current, bytes_of(std::string("\x0b", 1) + std::string(8, '\xff')), limits);
  EXPECT_EQ(d.status, DecodeStatus::invalid);
  EXPECT_NE(d.error.find("key count -1"), std::string::npos) << d.error;
}

TEST(Wire, CountThatCannotFitTheRequestLimitIsInvalid) {
  Limits limits;
  limits.max_request_bytes = 1000;
  std::string head = std::string("\x06", 1) + u64(200);  // WAIT: 200 keys need >= 1600 bytes
  Decoded d = decode(Dialect::current, bytes_of(head), limits);
  EXPECT_EQ(d.status, DecodeStatus::invalid);
  EXPECT_NE(d.error.find("cannot fit"), std::string::npos) << d.error;
}

TEST(Wire, RunningTotalIsHeldToMaxRequestBytes) {
  Limits limits;
  limits.max_request_bytes = 40;
  // MULTI_GET of three 5-byte keys: each field is within limits, together they are 1+8+3*13 = 48.
  Request request = make(Op::multi_get, {"/key1", "/key2", "/key3"});
  Bytes encoded = bytes_of(encode_request(Dialect::current, request));
  // Invalid as soon as the third key's length arrives, before its bytes.
  Bytes partial(encoded.begin(), encoded.begin() + 1 + 8 + 13 + 13 + 8);
  Decoded d = decode(Dialect::current, partial, limits);
  EXPECT_EQ(d.status, DecodeStatus::invalid);
  EXPECT_NE(d.error.find("max_request_bytes"), std::string::npos) << d.error;
  EXPECT_EQ(decode(Dialect::current, encoded, limits).status, DecodeStatus::invalid);
  // Two keys (35 bytes) fit.
  Bytes two = bytes_of(encode_request(Dialect::current, make(Op::multi_get, {"/key1", "/key2"})));
  EXPECT_EQ(decode(Dialect::current, two, limits).status, DecodeStatus::complete);
}

TEST(Wire, AuthFieldsAreHeldToTheKeyLimit) {
  Limits limits;
  std::string head = std::string("\x41", 1) + u64(limits.max_key_bytes + 1);
  EXPECT_EQ(decode(Dialect::current, bytes_of(head), limits).status, DecodeStatus::invalid);
}

TEST(Wire, ClaimedLengthsDoNotBecomeAllocations) {
  Limits limits;
  // WAIT claiming the maximum key count, and SET claiming an 8 MiB value, with almost nothing sent.
  Bytes wait = bytes_of(std::string("\x06", 1) + u64(limits.max_keys_per_request) + u64(3) + "/a");
  Bytes set = bytes_of(std::string("\x01", 1) + u64(2) + "/k" + u64(limits.max_value_bytes) +
                       std::string(100, 'x'));
  for (const Bytes& input : {wait, set}) {
    const std::size_t before = allocated_bytes();
    Decoded d = decode(Dialect::current, input, limits);
    const std::size_t allocated = allocated_bytes() - before;
    EXPECT_EQ(d.status, DecodeStatus::need_more);
    EXPECT_LT(allocated, 1024u);
  }
  // The counter does count: a whole request's fields are copied out.
  Bytes whole = bytes_of(encode_request(Dialect::current, make(Op::set, {"/k"}, {std::string(4096, 'v')})));
  const std::size_t before = allocated_bytes();
  EXPECT_EQ(decode(Dialect::current, whole, limits).status, DecodeStatus::complete);
  EXPECT_GE(allocated_bytes() - before, 4096u);
}

TEST(Wire, NeedAtLeastPointsPastTheAwaitedField) {
  std::string head = std::string("\x01", 1) + u64(2) + "/k" + u64(1000) + "abc";
  Decoded d = decode(Dialect::current, bytes_of(head));
  ASSERT_EQ(d.status, DecodeStatus::need_more);
  EXPECT_EQ(d.need_at_least, 1u + 8 + 2 + 8 + 1000);
  EXPECT_EQ(decode(Dialect::current, {}).need_at_least, 1u);
}

// --- Dialect detection -----------------------------------------------------------------------

TEST(Wire, DetectsTheDialectFromTheFirstBytes) {
  EXPECT_EQ(detect_dialect({}), std::nullopt);
  EXPECT_EQ(detect_dialect(hex({0x00})), std::nullopt);
  EXPECT_EQ(detect_dialect(hex({0x00, 0xCE})), std::nullopt);
  EXPECT_EQ(detect_dialect(hex({0x00, 0xCE, 0xF7, 0x85})), std::nullopt);
  EXPECT_EQ(detect_dialect(hex({0x00, 0xCE, 0xF7, 0x85, 0x3C})), Dialect::current);
  EXPECT_EQ(detect_dialect(hex({0x00, 0xCE, 0xF7, 0x85, 0x3C, 13, 1, 2, 3, 4})), Dialect::current);
  // A legacy first request: ADD "init/" 1 (code 3), or any non-zero code.
  EXPECT_EQ(detect_dialect(hex({0x03})), Dialect::legacy);
  EXPECT_EQ(detect_dialect(hex({0xFF})), Dialect::legacy);
  // A legacy SET (code 0) decides as soon as its key length departs from the magic...
  EXPECT_EQ(detect_dialect(hex({0x00, 0x04})), Dialect::legacy);
  // ... even when the key length begins like the magic: 0xCE = a 206-byte key.
  EXPECT_EQ(detect_dialect(hex({0x00, 0xCE, 0x00})), Dialect::legacy);
  EXPECT_EQ(detect_dialect(hex({0x00, 0xCE, 0xF7, 0x00})), Dialect::legacy);
  EXPECT_EQ(detect_dialect(hex({0x00, 0xCE, 0xF7, 0x85, 0x00})), Dialect::legacy);
  // And the whole legacy SET of a 206-byte key decodes.
  std::string key(206, 'k');
  Bytes set = bytes_of(encode_request(Dialect::legacy, make(Op::set, {key}, {"v"})));
  ASSERT_EQ(detect_dialect(set), Dialect::legacy);
  EXPECT_EQ(decode(Dialect::legacy, set).request, make(Op::set, {key}, {"v"}));
}

// --- Field helpers ---------------------------------------------------------------------------

TEST(Wire, IntegersAreLittleEndian) {
  std::string out;
  put_u32(out, 0x3C85F7CE);
  put_i64(out, -2);
  EXPECT_EQ(bytes_of(out), hex({0xCE, 0xF7, 0x85, 0x3C, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}));
  Bytes b = bytes_of(out);
  EXPECT_EQ(get_u32(std::span<const std::uint8_t, 4>(b.data(), 4)), kValidationMagic);
  EXPECT_EQ(get_i64(std::span<const std::uint8_t, 8>(b.data() + 4, 8)), -2);
  EXPECT_EQ(get_u64(std::span<const std::uint8_t, 8>(b.data() + 4, 8)), ~std::uint64_t{1});
}

}  // namespace
}  // namespace ddprun::rendezvous::wire

// libFuzzer target for the store's wire decoders: arbitrary bytes, as a hostile peer would send
// them, through detect_dialect and decode_request in both dialects, and through decode_reply as the
// reply to every op (a hostile store), under the default limits and under tiny ones (so the limit
// paths are reached without megabyte inputs).
//
// Invariants checked on every input (a failure aborts, which libFuzzer records as a crash):
//   - consumed <= bytes given; complete => consumed > 0 (requests); need_more/invalid => consumed == 0
//   - need_more => need_at_least is past the input; invalid => an error message
//   - encode(decode(x)) is byte-for-byte the consumed prefix of x, and decodes to the same request
//   - every proper prefix of a complete request decodes to need_more (checked at two cut points)
//   - a complete reply decodes the same from its consumed prefix alone, and every proper prefix of
//     it (two cut points) is need_more
#include "rendezvous/wire.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>

namespace wire = ddprun::rendezvous::wire;

namespace {

#define FUZZ_CHECK(condition)                                                          \
  do {                                                                                 \
    if (!(condition)) {                                                                \
      std::fprintf(stderr, "wire_fuzz: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                   #condition);                                                        \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

wire::Limits tiny_limits() {
  wire::Limits limits;
  limits.max_key_bytes = 16;
  limits.max_value_bytes = 64;
  limits.max_keys_per_request = 4;
  limits.max_request_bytes = 200;
  return limits;
}

void check_prefix_needs_more(wire::Dialect dialect, std::span<const std::uint8_t> request,
                             std::size_t cut, const wire::Limits& limits) {
  wire::Decoded d = wire::decode_request(dialect, request.first(cut), limits);
  FUZZ_CHECK(d.status == wire::DecodeStatus::need_more);
  FUZZ_CHECK(d.need_at_least > cut && d.need_at_least <= request.size());
}

/// Decodes request after request from `input`, as a server reading one connection would.
void decode_stream(wire::Dialect dialect, std::span<const std::uint8_t> input, const wire::Limits& limits) {
  while (true) {
    wire::Decoded d = wire::decode_request(dialect, input, limits);
    FUZZ_CHECK(d.consumed <= input.size());
    if (d.status == wire::DecodeStatus::need_more) {
      FUZZ_CHECK(d.consumed == 0);
      FUZZ_CHECK(d.need_at_least > input.size());
      FUZZ_CHECK(d.need_at_least <= limits.max_request_bytes);
      return;
    }
    if (d.status == wire::DecodeStatus::invalid) {
      FUZZ_CHECK(d.consumed == 0);
      FUZZ_CHECK(!d.error.empty());
      return;
    }
    FUZZ_CHECK(d.consumed > 0);
    FUZZ_CHECK(d.consumed <= limits.max_request_bytes);
    std::span<const std::uint8_t> request = input.first(d.consumed);

    const std::string encoded = wire::encode_request(dialect, d.request);  // must not throw
    FUZZ_CHECK(encoded.size() == request.size());
    FUZZ_CHECK(std::equal(encoded.begin(), encoded.end(), request.begin(),
                          [](char a, std::uint8_t b) { return static_cast<std::uint8_t>(a) == b; }));
    wire::Decoded again = wire::decode_request(
        dialect, {reinterpret_cast<const std::uint8_t*>(encoded.data()), encoded.size()}, limits);
    FUZZ_CHECK(again.status == wire::DecodeStatus::complete);
    FUZZ_CHECK(again.consumed == encoded.size());
    FUZZ_CHECK(again.request == d.request);

    check_prefix_needs_more(dialect, request, request.size() - 1, limits);
    check_prefix_needs_more(dialect, request, request.size() / 2, limits);
    input = input.subspan(d.consumed);
  }
}

constexpr wire::Op kEveryOp[] = {
    wire::Op::validate,  wire::Op::set,        wire::Op::compare_set, wire::Op::get,
    wire::Op::add,       wire::Op::check,      wire::Op::wait,        wire::Op::num_keys,
    wire::Op::watch_key, wire::Op::delete_key, wire::Op::append,      wire::Op::multi_get,
    wire::Op::multi_set, wire::Op::cancel_wait, wire::Op::ping,       wire::Op::queue_push,
    wire::Op::queue_pop, wire::Op::queue_len,  wire::Op::auth_challenge, wire::Op::auth_response,
};

/// Decodes `input` as the reply to `op`, as a client reading its connection would.
void decode_reply_of(wire::Op op, std::size_t keys, std::span<const std::uint8_t> input, const wire::Limits& limits) {
  const wire::DecodedReply d = wire::decode_reply(op, input, limits, keys);
  FUZZ_CHECK(d.consumed <= input.size());
  if (d.status == wire::DecodeStatus::need_more) {
    FUZZ_CHECK(d.consumed == 0);
    FUZZ_CHECK(d.need_at_least > input.size());
    return;
  }
  if (d.status == wire::DecodeStatus::invalid) {
    FUZZ_CHECK(d.consumed == 0);
    FUZZ_CHECK(!d.error.empty());
    return;
  }
  const std::span<const std::uint8_t> reply = input.first(d.consumed);
  const wire::DecodedReply alone = wire::decode_reply(op, reply, limits, keys);
  FUZZ_CHECK(alone.status == wire::DecodeStatus::complete);
  FUZZ_CHECK(alone.consumed == reply.size());
  FUZZ_CHECK(alone.reply == d.reply);
  for (std::size_t cut : {reply.size() / 2, reply.size() == 0 ? std::size_t{0} : reply.size() - 1}) {
    if (cut >= reply.size()) continue;
    const wire::DecodedReply part = wire::decode_reply(op, reply.first(cut), limits, keys);
    FUZZ_CHECK(part.status == wire::DecodeStatus::need_more);
    FUZZ_CHECK(part.need_at_least > cut && part.need_at_least <= reply.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> input(data, size);
  const std::optional<wire::Dialect> detected = wire::detect_dialect(input);
  FUZZ_CHECK(detected.has_value() || size < 5);
  if (detected == wire::Dialect::current) FUZZ_CHECK(size >= 5 && data[0] == 0);

  static const wire::Limits defaults;
  static const wire::Limits tiny = tiny_limits();
  for (wire::Dialect dialect : {wire::Dialect::legacy, wire::Dialect::current}) {
    decode_stream(dialect, input, defaults);
    decode_stream(dialect, input, tiny);
  }
  // The first byte picks MULTI_GET's key count, so that replies of several values are reached.
  const std::size_t keys = size > 0 ? data[0] % 5 : 0;
  const std::span<const std::uint8_t> reply = size > 0 ? input.subspan(1) : input;
  for (wire::Op op : kEveryOp) {
    decode_reply_of(op, keys, reply, defaults);
    decode_reply_of(op, keys, reply, tiny);
  }
  return 0;
}

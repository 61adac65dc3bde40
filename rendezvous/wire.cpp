#include "rendezvous/wire.hpp"

#include <array>
#include <stdexcept>

namespace ddprun::rendezvous::wire {
namespace {

constexpr std::uint8_t kAuthChallengeCode = 64;
constexpr std::uint8_t kAuthResponseCode = 65;

/// Code -> op, indexed by code. Legacy: PyTorch 1.13 (0..8) plus 2.0's APPEND..CANCEL_WAIT.
constexpr std::array kLegacyOps = {
    Op::set, Op::compare_set, Op::get, Op::add, Op::check, Op::wait, Op::num_keys, Op::watch_key,
    Op::delete_key, Op::append, Op::multi_get, Op::multi_set, Op::cancel_wait,
};
/// Current: PyTorch 2.1+ (TCPStoreBackend.hpp), VALIDATE first; PING and the queues came later in 2.x.
constexpr std::array kCurrentOps = {
    Op::validate, Op::set, Op::compare_set, Op::get, Op::add, Op::check, Op::wait, Op::num_keys,
    Op::delete_key, Op::append, Op::multi_get, Op::multi_set, Op::cancel_wait, Op::ping,
    Op::queue_push, Op::queue_pop, Op::queue_len,
};

constexpr std::array<std::uint8_t, 4> kMagicBytes = {0xCE, 0xF7, 0x85, 0x3C};  // kValidationMagic, LE

std::string_view dialect_name(Dialect dialect) {
  return dialect == Dialect::current ? "current (PyTorch 2.1+)" : "legacy (PyTorch 1.13/2.0)";
}

std::optional<Op> op_for_code(Dialect dialect, std::uint8_t code) {
  if (dialect == Dialect::legacy) {
    if (code < kLegacyOps.size()) return kLegacyOps[code];
    return std::nullopt;
  }
  if (code < kCurrentOps.size()) return kCurrentOps[code];
  if (code == kAuthChallengeCode) return Op::auth_challenge;
  if (code == kAuthResponseCode) return Op::auth_response;
  return std::nullopt;
}

/// Where a walk over a request or a reply stands in its input, and what it found: the bytes read so
/// far, and for need_more the input length it needs to get further.
class Cursor {
 public:
  explicit Cursor(std::span<const std::uint8_t> in) : in_(in) {}

  DecodeStatus status = DecodeStatus::complete;
  std::string error;
  std::size_t pos = 0;   // bytes read so far
  std::size_t need = 0;  // for need_more: input length needed to get further

 protected:
  /// True when the next `n` bytes are present; else need_more, with `need` set.
  bool present(std::size_t n) {
    if (n > in_.size() - pos) {
      status = DecodeStatus::need_more;
      need = pos + n;
      return false;
    }
    return true;
  }

  const std::uint8_t* take(std::size_t n) {
    const std::uint8_t* at = in_.data() + pos;
    pos += n;
    return at;
  }

  std::span<const std::uint8_t> in_;
};

/// One pass over a request. The framing pass (`out` null) only checks the lengths and counts it
/// runs into, allocating nothing; the filling pass, run once the framing pass found the request
/// whole, copies the fields into `out` and cannot fail. Field names (`op`, `field`) are joined into
/// text only for an error, so framing a request of 128 Ki keys allocates nothing per key.
class Walk : public Cursor {
 public:
  Walk(std::span<const std::uint8_t> in, const Limits& limits, Request* out)
      : Cursor(in), limits_(limits), out_(out) {}

  bool request(Dialect dialect);

 private:
  const Limits& limits_;
  Request* out_;
  std::string_view op_ = "request";

  bool invalid(std::string message) {
    status = DecodeStatus::invalid;
    error = std::string(op_) + ": " + message;
    return false;
  }

  /// Claims the next `n` bytes: false (need_more, or invalid past max_request_bytes) unless all
  /// are present. Invariant: pos <= max_request_bytes, so the subtraction cannot wrap.
  bool claim(std::size_t n, std::string_view field) {
    if (n > limits_.max_request_bytes - pos) {
      return invalid(std::string(field) + " takes the request past max_request_bytes (" +
                     std::to_string(limits_.max_request_bytes) + ")");
    }
    return present(n);
  }

  std::optional<std::uint64_t> u64(std::string_view field) {
    if (!claim(8, field)) return std::nullopt;
    return get_u64(std::span<const std::uint8_t, 8>(take(8), 8));
  }

  std::optional<std::uint32_t> u32(std::string_view field) {
    if (!claim(4, field)) return std::nullopt;
    return get_u32(std::span<const std::uint8_t, 4>(take(4), 4));
  }

  /// A u64 length then that many bytes, at most `max`: checked before the bytes are awaited.
  bool bytes(std::string_view field, std::size_t max, std::vector<std::string>* into) {
    auto length = u64(field);
    if (!length) return false;
    if (*length > max) {
      return invalid(std::string(field) + " of " + std::to_string(*length) +
                     " bytes exceeds the limit of " + std::to_string(max));
    }
    if (!claim(static_cast<std::size_t>(*length), field)) return false;
    const std::uint8_t* at = take(static_cast<std::size_t>(*length));
    if (out_ != nullptr) into->emplace_back(reinterpret_cast<const char*>(at), *length);
    return true;
  }

  bool key() { return bytes("key", limits_.max_key_bytes, out_ ? &out_->keys : nullptr); }
  bool value(std::string_view field = "value") {
    return bytes(field, limits_.max_value_bytes, out_ ? &out_->values : nullptr);
  }
  bool small_value(std::string_view field) {
    return bytes(field, limits_.max_key_bytes, out_ ? &out_->values : nullptr);
  }

  /// A u64 count of fields of at least `min_field_bytes` each, held to the limits at once: a count
  /// that could never fit is invalid before any of its fields arrive.
  std::optional<std::uint64_t> count(std::size_t min_field_bytes) {
    auto n = u64("key count");
    if (!n) return std::nullopt;
    if (*n > limits_.max_keys_per_request) {
      // MULTI_SET's count is an i64 on the wire: a negative one reads as a huge u64.
      const auto as_signed = static_cast<std::int64_t>(*n);
      invalid("key count " + (as_signed < 0 ? std::to_string(as_signed) : std::to_string(*n)) +
              " exceeds the limit of " + std::to_string(limits_.max_keys_per_request));
      return std::nullopt;
    }
    if (*n > (limits_.max_request_bytes - pos) / min_field_bytes) {
      invalid(std::to_string(*n) + " keys cannot fit in max_request_bytes (" +
              std::to_string(limits_.max_request_bytes) + ")");
      return std::nullopt;
    }
    return n;
  }
};

bool Walk::request(Dialect dialect) {
  if (!claim(1, "code")) return false;
  const std::uint8_t code = *take(1);
  const std::optional<Op> op = op_for_code(dialect, code);
  if (!op) {
    return invalid("unknown request code " + std::to_string(code) + " in the " +
                   std::string(dialect_name(dialect)) + " dialect");
  }
  op_ = op_name(*op);
  if (out_ != nullptr) out_->op = *op;

  switch (*op) {
    case Op::validate: {
      auto magic = u32("magic");
      if (!magic) return false;
      if (*magic != kValidationMagic) {
        return invalid("magic " + std::to_string(*magic) + " is not " + std::to_string(kValidationMagic));
      }
      if (out_ != nullptr) out_->number = *magic;
      return true;
    }
    case Op::ping: {
      auto nonce = u32("nonce");
      if (!nonce) return false;
      if (out_ != nullptr) out_->number = *nonce;
      return true;
    }
    case Op::set:
    case Op::append:
    case Op::queue_push:
      return key() && value();
    case Op::compare_set:
      return key() && value("expected value") && value("desired value");
    case Op::get:
    case Op::watch_key:
    case Op::delete_key:
    case Op::queue_pop:
    case Op::queue_len:
      return key();
    case Op::add: {
      if (!key()) return false;
      auto delta = u64("delta");
      if (!delta) return false;
      if (out_ != nullptr) out_->delta = static_cast<std::int64_t>(*delta);
      return true;
    }
    case Op::check:
    case Op::wait:
    case Op::multi_get: {
      auto n = count(8);
      if (!n) return false;
      for (std::uint64_t i = 0; i < *n; ++i) {
        if (!key()) return false;
      }
      return true;
    }
    case Op::multi_set: {
      auto n = count(16);
      if (!n) return false;
      for (std::uint64_t i = 0; i < *n; ++i) {
        if (!key() || !value()) return false;
      }
      return true;
    }
    case Op::num_keys:
    case Op::cancel_wait:
    case Op::auth_challenge:
      return true;
    case Op::auth_response:
      return small_value("proof") && small_value("client nonce");
  }
  return invalid("unhandled op");
}

/// Throws unless `request` has `keys` keys and `values` values.
void expect_shape(const Request& request, std::size_t keys, std::size_t values) {
  if (request.keys.size() != keys || request.values.size() != values) {
    throw std::invalid_argument(std::string(op_name(request.op)) + " takes " + std::to_string(keys) +
                                " key(s) and " + std::to_string(values) + " value(s), got " +
                                std::to_string(request.keys.size()) + " and " +
                                std::to_string(request.values.size()));
  }
}

/// One pass over a reply, as Walk over a request: the framing pass (`out` null) checks lengths and
/// values and allocates nothing; the filling pass, run once the reply is whole, copies the fields.
class ReplyWalk : public Cursor {
 public:
  ReplyWalk(std::span<const std::uint8_t> in, const Limits& limits, Reply* out)
      : Cursor(in), limits_(limits), out_(out) {}

  bool reply(Op op, std::size_t keys);

 private:
  const Limits& limits_;
  Reply* out_;

  bool invalid(std::string message) {
    status = DecodeStatus::invalid;
    error = std::move(message);
    return false;
  }

  bool claim(std::size_t n) { return present(n); }

  bool number(std::int64_t value) {
    if (out_ != nullptr) out_->number = value;
    return true;
  }

  bool i64() {
    if (!claim(8)) return false;
    return number(get_i64(std::span<const std::uint8_t, 8>(take(8), 8)));
  }

  bool u32() {
    if (!claim(4)) return false;
    return number(get_u32(std::span<const std::uint8_t, 4>(take(4), 4)));
  }

  /// A u8 that must be `allowed` (or `also`): else "<OP> reply N where <allowed> was expected".
  bool u8(Op op, std::uint8_t allowed, std::optional<std::uint8_t> also = std::nullopt) {
    if (!claim(1)) return false;
    const std::uint8_t got = *take(1);
    if (got != allowed && got != also) {
      std::string text = std::string(op_name(op)) + " reply " + std::to_string(got);
      if (!also) text += " where " + std::to_string(allowed) + " was expected";
      return invalid(std::move(text));
    }
    return number(got);
  }

  /// A u64 length, held to `max` before the bytes are awaited, then the bytes.
  bool bytes(std::size_t max) {
    if (!claim(8)) return false;
    const std::uint64_t length = get_u64(std::span<const std::uint8_t, 8>(take(8), 8));
    if (length > max) {
      return invalid("a value of " + std::to_string(length) + " bytes, over the limit of " + std::to_string(max));
    }
    if (!claim(static_cast<std::size_t>(length))) return false;
    const std::uint8_t* at = take(static_cast<std::size_t>(length));
    if (out_ != nullptr) out_->values.emplace_back(reinterpret_cast<const char*>(at), static_cast<std::size_t>(length));
    return true;
  }
};

bool ReplyWalk::reply(Op op, std::size_t keys) {
  switch (op) {
    case Op::validate:
    case Op::set:
    case Op::append:
    case Op::multi_set:
    case Op::queue_push:
      return true;
    case Op::get:
    case Op::compare_set:
      return bytes(limits_.max_value_bytes);
    case Op::add:
    case Op::num_keys:
    case Op::delete_key:
    case Op::queue_len:
      return i64();
    case Op::check:
      return u8(op, kCheckReady, kCheckNotReady);
    case Op::wait:
      return u8(op, kStopWaiting);
    case Op::cancel_wait:
      return u8(op, kWaitCanceled);
    case Op::watch_key:
      return u8(op, kWatchRegistered);
    case Op::ping:
      return u32();
    case Op::multi_get:
      if (out_ != nullptr) out_->values.reserve(keys);  // the framing pass saw all of them present
      for (std::size_t i = 0; i < keys; ++i) {
        if (!bytes(limits_.max_value_bytes)) return false;
      }
      return true;
    case Op::queue_pop: {
      if (!i64()) return false;
      const std::int64_t length = get_i64(std::span<const std::uint8_t, 8>(in_.data() + pos - 8, 8));
      return length <= 0 || bytes(limits_.max_value_bytes);
    }
    case Op::auth_challenge:
      return bytes(kMaxAuthReplyBytes);
    case Op::auth_response:
      return u8(op, 1) && bytes(kMaxAuthReplyBytes);
  }
  return invalid("a reply to an unknown request");
}

}  // namespace

std::string_view op_name(Op op) {
  switch (op) {
    case Op::validate: return "VALIDATE";
    case Op::set: return "SET";
    case Op::compare_set: return "COMPARE_SET";
    case Op::get: return "GET";
    case Op::add: return "ADD";
    case Op::check: return "CHECK";
    case Op::wait: return "WAIT";
    case Op::num_keys: return "GETNUMKEYS";
    case Op::watch_key: return "WATCH_KEY";
    case Op::delete_key: return "DELETE_KEY";
    case Op::append: return "APPEND";
    case Op::multi_get: return "MULTI_GET";
    case Op::multi_set: return "MULTI_SET";
    case Op::cancel_wait: return "CANCEL_WAIT";
    case Op::ping: return "PING";
    case Op::queue_push: return "QUEUE_PUSH";
    case Op::queue_pop: return "QUEUE_POP";
    case Op::queue_len: return "QUEUE_LEN";
    case Op::auth_challenge: return "AUTH_CHALLENGE";
    case Op::auth_response: return "AUTH_RESPONSE";
  }
  return "UNKNOWN";
}

std::optional<std::uint8_t> op_code(Dialect dialect, Op op) {
  if (dialect == Dialect::current) {
    if (op == Op::auth_challenge) return kAuthChallengeCode;
    if (op == Op::auth_response) return kAuthResponseCode;
  }
  const auto find = [op](const auto& table) -> std::optional<std::uint8_t> {
    for (std::size_t code = 0; code < table.size(); ++code) {
      if (table[code] == op) return static_cast<std::uint8_t>(code);
    }
    return std::nullopt;
  };
  return dialect == Dialect::legacy ? find(kLegacyOps) : find(kCurrentOps);
}

Decoded decode_request(Dialect dialect, std::span<const std::uint8_t> bytes, const Limits& limits) {
  Decoded result;
  Walk frame(bytes, limits, nullptr);
  if (!frame.request(dialect)) {
    result.status = frame.status;
    result.error = std::move(frame.error);
    result.need_at_least = frame.need;
    return result;
  }
  Walk fill(bytes, limits, &result.request);
  fill.request(dialect);  // cannot fail: the framing pass saw every field whole and within limits
  result.status = DecodeStatus::complete;
  result.consumed = fill.pos;
  return result;
}

DecodedReply decode_reply(Op op, std::span<const std::uint8_t> bytes, const Limits& limits, std::size_t keys) {
  DecodedReply result;
  ReplyWalk frame(bytes, limits, nullptr);
  if (!frame.reply(op, keys)) {
    result.status = frame.status;
    result.error = std::move(frame.error);
    result.need_at_least = frame.need;
    return result;
  }
  ReplyWalk fill(bytes, limits, &result.reply);
  fill.reply(op, keys);  // cannot fail: the framing pass saw every field whole and valid
  result.status = DecodeStatus::complete;
  result.consumed = fill.pos;
  return result;
}

std::optional<Dialect> detect_dialect(std::span<const std::uint8_t> first_bytes) {
  if (first_bytes.empty()) return std::nullopt;
  if (first_bytes[0] != 0) return Dialect::legacy;
  // A legacy SET starts 00 too, then its u64 key length: it could only match the magic with a key
  // of >= 0x3C85F7CE bytes, which the limits reject anyway. So any mismatch decides at once.
  for (std::size_t i = 1; i < first_bytes.size() && i <= kMagicBytes.size(); ++i) {
    if (first_bytes[i] != kMagicBytes[i - 1]) return Dialect::legacy;
  }
  if (first_bytes.size() <= kMagicBytes.size()) return std::nullopt;
  return Dialect::current;
}

std::string encode_request(Dialect dialect, const Request& request) {
  const std::optional<std::uint8_t> code = op_code(dialect, request.op);
  if (!code) {
    throw std::invalid_argument(std::string(op_name(request.op)) + " does not exist in the " +
                                std::string(dialect_name(dialect)) + " dialect");
  }
  std::string out;
  put_u8(out, *code);
  switch (request.op) {
    case Op::validate:
      expect_shape(request, 0, 0);
      put_u32(out, kValidationMagic);
      break;
    case Op::ping:
      expect_shape(request, 0, 0);
      put_u32(out, request.number);
      break;
    case Op::set:
    case Op::append:
    case Op::queue_push:
      expect_shape(request, 1, 1);
      put_bytes(out, request.keys[0]);
      put_bytes(out, request.values[0]);
      break;
    case Op::compare_set:
      expect_shape(request, 1, 2);
      put_bytes(out, request.keys[0]);
      put_bytes(out, request.values[0]);
      put_bytes(out, request.values[1]);
      break;
    case Op::get:
    case Op::watch_key:
    case Op::delete_key:
    case Op::queue_pop:
    case Op::queue_len:
      expect_shape(request, 1, 0);
      put_bytes(out, request.keys[0]);
      break;
    case Op::add:
      expect_shape(request, 1, 0);
      put_bytes(out, request.keys[0]);
      put_i64(out, request.delta);
      break;
    case Op::check:
    case Op::wait:
    case Op::multi_get:
      expect_shape(request, request.keys.size(), 0);
      put_u64(out, request.keys.size());
      for (const auto& key : request.keys) put_bytes(out, key);
      break;
    case Op::multi_set:
      expect_shape(request, request.keys.size(), request.keys.size());
      put_i64(out, static_cast<std::int64_t>(request.keys.size()));  // PyTorch sends an i64 here
      for (std::size_t i = 0; i < request.keys.size(); ++i) {
        put_bytes(out, request.keys[i]);
        put_bytes(out, request.values[i]);
      }
      break;
    case Op::num_keys:
    case Op::cancel_wait:
    case Op::auth_challenge:
      expect_shape(request, 0, 0);
      break;
    case Op::auth_response:
      expect_shape(request, 0, 2);
      put_bytes(out, request.values[0]);
      put_bytes(out, request.values[1]);
      break;
  }
  return out;
}

std::string encode_watch_push(std::uint8_t type, std::string_view key, std::string_view old_value,
                              std::string_view new_value) {
  std::string out;
  put_u8(out, type);
  put_bytes(out, key);
  put_bytes(out, old_value);
  put_bytes(out, new_value);
  return out;
}

// Little-endian, byte by byte: PyTorch writes host order, which is little-endian on every platform
// it runs on; spelling it out keeps this code right on any host.
void put_u8(std::string& out, std::uint8_t value) { out.push_back(static_cast<char>(value)); }

void put_u32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void put_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void put_i64(std::string& out, std::int64_t value) { put_u64(out, static_cast<std::uint64_t>(value)); }

void put_bytes(std::string& out, std::string_view bytes) {
  put_u64(out, bytes.size());
  out.append(bytes);
}

std::uint32_t get_u32(std::span<const std::uint8_t, 4> bytes) {
  std::uint32_t value = 0;
  for (std::size_t i = 4; i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

std::uint64_t get_u64(std::span<const std::uint8_t, 8> bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 8; i-- > 0;) value = (value << 8) | bytes[i];
  return value;
}

std::int64_t get_i64(std::span<const std::uint8_t, 8> bytes) {
  return static_cast<std::int64_t>(get_u64(bytes));
}

}  // namespace ddprun::rendezvous::wire

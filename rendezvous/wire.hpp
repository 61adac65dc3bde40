#pragma once
/// The TCPStore byte protocol, both dialects (the contract's section 4): decoding requests as a
/// server sees them, encoding them as a client sends them, and the reply fields. Pure code: no I/O,
/// and every length is checked against the limits before anything is allocated for it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::rendezvous::wire {

/// Current = PyTorch >= 2.x (VALIDATE first, PING, queues); legacy = PyTorch 1.13 numbering
/// (with 2.0/2.1's APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT, and 1.13's WATCH_KEY).
enum class Dialect { current, legacy };

/// What a request asks, whatever its code in the dialect that carried it.
enum class Op : std::uint8_t {
  validate,
  set,
  compare_set,
  get,
  add,
  check,
  wait,
  num_keys,
  watch_key,  ///< legacy only
  delete_key,
  append,
  multi_get,
  multi_set,
  cancel_wait,
  ping,        ///< current only
  queue_push,  ///< current only
  queue_pop,   ///< current only
  queue_len,   ///< current only
  auth_challenge,  ///< ddprun extension, current dialect only: code 64
  auth_response,   ///< ddprun extension, current dialect only: code 65
};

std::string_view op_name(Op op);  ///< "SET", "COMPARE_SET", ... for messages

/// The code byte of `op` in `dialect`; nothing when the dialect lacks the op (e.g. PING in legacy).
std::optional<std::uint8_t> op_code(Dialect dialect, Op op);

/// Bounds on what one peer may make the server hold. Defaults are PyTorch's libuv server's.
struct Limits {
  std::size_t max_key_bytes = 8 * 1024;
  std::size_t max_value_bytes = 8 * 1024 * 1024;
  std::size_t max_keys_per_request = 128 * 1024;  ///< CHECK, WAIT, MULTI_GET, MULTI_SET
  std::size_t max_request_bytes = 64 * 1024 * 1024;  ///< a whole request, all fields together
};

/// One decoded request. Field use by op:
///   keys:   the key (single-key ops), or the n keys of CHECK/WAIT/MULTI_GET/MULTI_SET
///   values: SET/APPEND/QUEUE_PUSH {value}; COMPARE_SET {expected, desired}; MULTI_SET the n values;
///           AUTH_RESPONSE {proof, client_nonce}
///   delta:  ADD
///   number: VALIDATE magic, PING nonce
struct Request {
  Op op = Op::ping;
  std::vector<std::string> keys;
  std::vector<std::string> values;
  std::int64_t delta = 0;
  std::uint32_t number = 0;

  friend bool operator==(const Request&, const Request&) = default;
};

inline constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;

enum class DecodeStatus {
  complete,   ///< `request` holds the request; `consumed` bytes of the input were used
  need_more,  ///< the input is a valid but unfinished request: read more and call again
  invalid,    ///< unknown code, a length over the limits, or a malformed field: close the connection
};

struct Decoded {
  DecodeStatus status = DecodeStatus::need_more;
  std::size_t consumed = 0;
  Request request;
  std::string error;  ///< for `invalid`: what was wrong, for the server's log
  /// For `need_more`: the input must reach at least this many bytes before decoding can get
  /// further, so a server may skip re-decoding until then (e.g. while an 8 MiB value arrives).
  std::size_t need_at_least = 0;
};

/// Decodes the request at the front of `bytes`. A length field is checked against `limits` as soon as
/// it is read, so an oversized request is `invalid` before its body arrives. Every proper prefix of a
/// valid request is `need_more`. Memory used is proportional to the bytes present, never to a length
/// or count the peer claims. VALIDATE is `complete` only with the right magic (`number` then holds
/// it); AUTH_RESPONSE's two fields are held to `max_key_bytes` each.
Decoded decode_request(Dialect dialect, std::span<const std::uint8_t> bytes, const Limits& limits);

/// The dialect of a connection from its first bytes (0 then CE F7 85 3C = current; anything else is
/// legacy); nothing while too few bytes have arrived to tell.
std::optional<Dialect> detect_dialect(std::span<const std::uint8_t> first_bytes);

/// The bytes a client sends for `request`. Throws std::invalid_argument when the dialect has no
/// code for the op, or when `keys`/`values` do not have the op's shape (see Request). VALIDATE
/// always carries kValidationMagic, whatever `number` holds.
std::string encode_request(Dialect dialect, const Request& request);

// Reply fields. Replies have no code byte: each op's reply is a fixed sequence of these.
//   SET, APPEND, MULTI_SET, QUEUE_PUSH, VALIDATE: nothing
//   GET, COMPARE_SET: bytes          ADD, GETNUMKEYS, DELETE_KEY, QUEUE_LEN: i64
//   CHECK: u8 (kCheckReady / kCheckNotReady)          WAIT: u8 kStopWaiting (when all keys exist)
//   MULTI_GET: n x bytes              CANCEL_WAIT: u8 kWaitCanceled     PING: u32 nonce
//   QUEUE_POP: i64 length before the pop, then bytes when it was > 0
//   WATCH_KEY (legacy): u8 kWatchRegistered; later, on every change of the key, a push (below)
//   AUTH_CHALLENGE: bytes server_nonce   AUTH_RESPONSE: u8 1 then bytes server_proof (or the close)
inline constexpr std::uint8_t kCheckReady = 0;
inline constexpr std::uint8_t kCheckNotReady = 1;
inline constexpr std::uint8_t kStopWaiting = 0;
inline constexpr std::uint8_t kWaitCanceled = 1;
inline constexpr std::uint8_t kWatchRegistered = 3;

/// The longest AUTH_CHALLENGE nonce or AUTH_RESPONSE proof a client takes (both are 32 bytes in v1).
inline constexpr std::size_t kMaxAuthReplyBytes = 1024;

/// One decoded reply. Field use by op:
///   number: the i64 of ADD, GETNUMKEYS, DELETE_KEY, QUEUE_LEN; QUEUE_POP's length before the pop;
///           the u8 of CHECK, WAIT, CANCEL_WAIT, WATCH_KEY, AUTH_RESPONSE; PING's u32 nonce
///   values: GET, COMPARE_SET, AUTH_CHALLENGE {bytes}; AUTH_RESPONSE {server proof}; MULTI_GET the
///           n values; QUEUE_POP {bytes} when number > 0
struct Reply {
  std::int64_t number = 0;
  std::vector<std::string> values;

  friend bool operator==(const Reply&, const Reply&) = default;
};

struct DecodedReply {
  DecodeStatus status = DecodeStatus::need_more;
  std::size_t consumed = 0;  ///< for `complete`: bytes of the input the reply used
  Reply reply;
  /// For `invalid`: what the store answered, as a client's message shows it ("a value of 9 bytes,
  /// over the limit of 8", "CHECK reply 7", "WAIT reply 1 where 0 was expected").
  std::string error;
  /// For `need_more`: the input must reach at least this many bytes before decoding can get further.
  std::size_t need_at_least = 0;
};

/// Decodes the reply to an `op` request at the front of `bytes` (`keys`: how many keys a MULTI_GET
/// asked for; ignored for other ops). A value's length is held to `limits.max_value_bytes`
/// (AUTH_CHALLENGE's and AUTH_RESPONSE's to kMaxAuthReplyBytes) as soon as it is read, and a u8 reply
/// must be one the protocol allows (CHECK: kCheckReady or kCheckNotReady; WAIT: kStopWaiting;
/// CANCEL_WAIT: kWaitCanceled; WATCH_KEY: kWatchRegistered; AUTH_RESPONSE: 1), else `invalid`.
/// Ops with no reply (SET, APPEND, MULTI_SET, QUEUE_PUSH, VALIDATE) are `complete` with nothing
/// consumed. Every proper prefix of a reply is `need_more`; memory used is proportional to the bytes
/// present, never to a length the peer claims. Pure: no I/O.
DecodedReply decode_reply(Op op, std::span<const std::uint8_t> bytes, const Limits& limits, std::size_t keys = 0);

/// WATCH_KEY pushes (PyTorch 1.13/2.0 WatchResponseType), sent unasked on the connection that
/// registered the watch: u8 type, bytes key, bytes old value, bytes new value.
inline constexpr std::uint8_t kWatchKeyUpdated = 0;   ///< old = previous value, new = value now
inline constexpr std::uint8_t kWatchKeyCreated = 1;   ///< old = empty, new = value now
inline constexpr std::uint8_t kWatchKeyDeleted = 2;   ///< old = previous value, new = empty
inline constexpr std::uint8_t kWatchKeyAppended = 4;  ///< 2.0 APPEND: old = empty, new = the added bytes

/// The bytes of one WATCH_KEY push.
std::string encode_watch_push(std::uint8_t type, std::string_view key, std::string_view old_value,
                              std::string_view new_value);

void put_u8(std::string& out, std::uint8_t value);
void put_u32(std::string& out, std::uint32_t value);
void put_i64(std::string& out, std::int64_t value);
void put_u64(std::string& out, std::uint64_t value);
void put_bytes(std::string& out, std::string_view bytes);  ///< u64 length, then the bytes

/// Little-endian readers over exactly the right number of bytes (clients read field by field).
std::uint32_t get_u32(std::span<const std::uint8_t, 4> bytes);
std::uint64_t get_u64(std::span<const std::uint8_t, 8> bytes);
std::int64_t get_i64(std::span<const std::uint8_t, 8> bytes);

}  // namespace ddprun::rendezvous::wire

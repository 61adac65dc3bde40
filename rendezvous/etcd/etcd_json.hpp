#pragma once
/// The JSON of etcd's v3 gateway (the grpc-gateway mapping of etcdserverpb): request bodies and
/// what the replies mean, apart from any I/O. Keys and values are base64 in the JSON; 64-bit
/// numbers (revisions, lease ids) are decimal strings. Pure; a reply that is not what etcd sends
/// throws EtcdReplyError naming what was wrong.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/store_error.hpp"

namespace ddprun::rendezvous::etcd {

/// A reply that is not etcd's JSON (a proxy's page, a truncated body).
struct EtcdReplyError : StoreError {
  using StoreError::StoreError;
};

std::string base64_encode(std::string_view bytes);
/// nullopt for text that is not standard base64 (with padding).
std::optional<std::string> base64_decode(std::string_view text);

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;  ///< puts since the key was created (1 after the first)
  std::int64_t lease = 0;
};

/// One compare of a transaction: the key's create revision, mod revision or value equals this.
struct Compare {
  enum class Target { create, mod, value };
  Target target = Target::create;
  std::string key;
  std::int64_t revision = 0;  ///< create, mod (create 0: the key does not exist)
  std::string value;          ///< value
};

/// One operation of a transaction (or a request of its own).
struct Operation {
  enum class Kind { range, put };
  Kind kind = Kind::range;
  std::string key;
  std::string value;       ///< put
  std::int64_t lease = 0;  ///< put: 0 = no lease
};

std::string range_body(std::string_view key);
std::string put_body(std::string_view key, std::string_view value, std::int64_t lease);
std::string txn_body(const std::vector<Compare>& compares, const std::vector<Operation>& success,
                     const std::vector<Operation>& failure);
std::string lease_grant_body(std::int64_t ttl_seconds);
std::string lease_id_body(std::int64_t id);  ///< keepalive and revoke: {"ID": "<id>"}
std::string authenticate_body(std::string_view user, std::string_view password);
/// A watch of exactly `key` from `start_revision` on.
std::string watch_body(std::string_view key, std::int64_t start_revision);

struct RangeReply {
  std::int64_t revision = 0;  ///< the store's revision when it answered
  std::optional<KeyValue> kv;
};
RangeReply parse_range(std::string_view body);

struct TxnReply {
  std::int64_t revision = 0;
  bool succeeded = false;
  /// One per operation of the branch that ran: a range's key-value (nullopt: no such key), or
  /// nullopt for a put.
  std::vector<std::optional<KeyValue>> ranges;
};
TxnReply parse_txn(std::string_view body);

struct LeaseReply {
  std::int64_t id = 0;
  std::int64_t ttl = 0;  ///< keepalive: 0 when the lease is gone (expired or revoked)
};
LeaseReply parse_lease_grant(std::string_view body);
/// The keepalive's streamed reply ({"result": {...}}).
LeaseReply parse_keepalive(std::string_view body);
std::string parse_token(std::string_view body);

/// An error reply: {"error": ..., "code": <gRPC code>, "message": ...}.
struct ApiError {
  int code = 0;
  std::string message;
};
/// nullopt when `body` is no error reply.
std::optional<ApiError> parse_error(std::string_view body);

/// What to do about a failed request.
enum class Failure {
  retry_elsewhere,  ///< the member cannot serve now (no leader, leader changed, timed out, stopping)
  reauthenticate,   ///< the auth token expired or was revoked: authenticate again, then retry
  authentication,   ///< the credentials are missing or wrong: tell the user
  fatal,            ///< anything else: the request itself is wrong
};
/// Decides from the HTTP status and the error reply (gRPC codes: 14 unavailable, 4 deadline
/// exceeded, 16 unauthenticated, 7 permission denied, 3 invalid argument with etcd's auth texts).
Failure classify(int http_status, const std::optional<ApiError>& error);

/// One message of a watch stream.
struct WatchEvent {
  bool deleted = false;
  KeyValue kv;
};
struct WatchMessage {
  std::int64_t revision = 0;
  bool created = false;
  bool canceled = false;
  std::int64_t compact_revision = 0;  ///< > 0: the start revision was compacted away
  std::string cancel_reason;
  std::vector<WatchEvent> events;
  std::optional<ApiError> error;  ///< the stream carried an error instead of a result
};
WatchMessage parse_watch_message(std::string_view line);

/// `text` for a one-line message: line breaks and tabs become spaces, runs of spaces one, and
/// at most `limit` bytes (then "...").
std::string one_line(std::string_view text, std::size_t limit);

/// Splits a watch stream's bytes into its newline-ended messages: appends `bytes` to `pending` and
/// returns every complete line (without the newline), leaving the incomplete rest in `pending`
/// (which the caller bounds: kMaxWatchMessage).
std::vector<std::string> take_lines(std::string& pending, std::string_view bytes);

/// The longest watch message (or error reply) a stream may carry before the member is left: the
/// rendezvous' values are a few KiB, and etcd's own request limit is 1.5 MiB by default.
inline constexpr std::size_t kMaxWatchMessage = 16 * 1024 * 1024;

}  // namespace ddprun::rendezvous::etcd

#include "rendezvous/store_client.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "rendezvous/auth.hpp"
#include "rendezvous/deadline_socket.hpp"

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace ddprun::rendezvous {
namespace {

constexpr milliseconds kFirstBackoff{10};
constexpr milliseconds kMaxBackoff{1000};
/// After a wait timed out, how long CANCEL_WAIT may take: a store that answers nothing must not turn
/// a 5 s wait into the default 300 s one.
constexpr milliseconds kCancelWaitTimeout{10000};
/// The largest server nonce or proof the handshake reads (both are 32 bytes in v1).
constexpr std::size_t kMaxAuthFieldBytes = 1024;

/// A key as messages show it: quoted, other bytes than printable ASCII as \xNN, a long key cut.
std::string describe_key(std::string_view key) {
  constexpr std::size_t kMaxShown = 100;
  std::string out = "\"";
  for (std::size_t i = 0; i < key.size() && i < kMaxShown; ++i) {
    auto c = static_cast<unsigned char>(key[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (key.size() > kMaxShown) out += " (cut, " + std::to_string(key.size()) + " bytes)";
  return out;
}

std::string describe_keys(const std::vector<std::string>& keys) {
  constexpr std::size_t kMaxListed = 3;
  std::string out;
  for (std::size_t i = 0; i < keys.size() && i < kMaxListed; ++i) {
    if (i > 0) out += ", ";
    out += describe_key(keys[i]);
  }
  if (keys.size() > kMaxListed) out += " and " + std::to_string(keys.size() - kMaxListed) + " more";
  if (keys.empty()) out = "no keys";
  return out;
}

std::string prefixed(std::string_view key) {
  std::string out = "/";
  out.append(key);
  return out;
}

std::vector<std::string> prefixed(const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) out.push_back(prefixed(key));
  return out;
}

/// "[::1]" as a host is accepted for "::1", as in URLs.
std::string bare_host(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

std::string format_address(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

wire::Request make_request(wire::Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  wire::Request request;
  request.op = op;
  request.keys = std::move(keys);
  request.values = std::move(values);
  return request;
}

}  // namespace

/// The store protocol over one DeadlineSocket: connection retry, handshake, authentication and the
/// calls. Calls are serialized by `mutex_`.
class StoreClient::Impl {
 public:
  explicit Impl(StoreClientOptions options_in)
      : options(std::move(options_in)),
        address(format_address(bare_host(options.host), options.port)),
        rng_(std::random_device{}()) {
    options.host = bare_host(options.host);
  }

  StoreClientOptions options;
  const std::string address;

  /// Runs `body` under the lock; a CallFailed becomes StoreError/StoreTimeout naming `what`.
  template <class Body>
  auto call(const std::string& what, Body&& body) -> decltype(body()) {
    std::lock_guard lock(mutex_);
    try {
      return body();
    } catch (const CallFailed& failed) {
      std::string message = "store " + address + ": " + what + (failed.timed_out ? " " : " failed: ") + failed.reason;
      if (failed.timed_out) throw StoreTimeout(message);
      throw StoreError(message);
    }
  }

  void connect() { connect_with_retry(); }
  void ensure_connected_now() { ensure_connected(); }

  /// Checks `request` against the limits (no I/O when it is over them), reconnects when the connection
  /// is gone (unless `mid_exchange`: a reply of ours may be on its way, a new connection would lose
  /// it), and sends it. Returns the deadline of the reply.
  Deadline send(const wire::Request& request, milliseconds timeout, bool mid_exchange = false) {
    check_limits(request);
    std::string bytes = encode(request);
    if (bytes.size() > options.limits.max_request_bytes) {
      throw CallFailed{"the request is " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                       std::to_string(options.limits.max_request_bytes)};
    }
    if (!mid_exchange) {
      const wire::Dialect before = dialect_;
      ensure_connected();
      if (dialect_ != before) bytes = encode(request);  // this connection fell back to the legacy dialect
    }
    Deadline deadline = deadline_after(timeout);
    socket_.write_all(bytes, deadline);
    return deadline;
  }

  std::uint8_t read_u8(const Deadline& deadline) {
    socket_.fill(1, deadline);
    return static_cast<std::uint8_t>(*socket_.take(1));
  }

  std::uint32_t read_u32(const Deadline& deadline) {
    socket_.fill(4, deadline);
    return wire::get_u32(std::span<const std::uint8_t, 4>(reinterpret_cast<const std::uint8_t*>(socket_.take(4)), 4));
  }

  std::int64_t read_i64(const Deadline& deadline) {
    socket_.fill(8, deadline);
    return wire::get_i64(std::span<const std::uint8_t, 8>(reinterpret_cast<const std::uint8_t*>(socket_.take(8)), 8));
  }

  /// A u64 length, checked against `max_bytes` before anything is allocated, then the bytes.
  std::string read_bytes(const Deadline& deadline, std::size_t max_bytes) {
    socket_.fill(8, deadline);
    std::uint64_t size =
        wire::get_u64(std::span<const std::uint8_t, 8>(reinterpret_cast<const std::uint8_t*>(socket_.take(8)), 8));
    if (size > max_bytes) {
      fail_protocol("a value of " + std::to_string(size) + " bytes, over the limit of " + std::to_string(max_bytes));
    }
    socket_.fill(static_cast<std::size_t>(size), deadline);
    return std::string(socket_.take(static_cast<std::size_t>(size)), static_cast<std::size_t>(size));
  }
  std::string read_value(const Deadline& deadline) { return read_bytes(deadline, options.limits.max_value_bytes); }

  void expect_byte(std::uint8_t got, std::uint8_t expected, std::string_view reply) {
    if (got != expected) {
      fail_protocol(std::string(reply) + " " + std::to_string(got) + " where " + std::to_string(expected) +
                    " was expected");
    }
  }

  /// The connection is out of step: close it so the next call starts over.
  [[noreturn]] void fail_protocol(const std::string& what) {
    socket_.close();
    throw CallFailed{"the store answered with " + what + " (the connection is closed)"};
  }

  /// WAIT for `keys` (prefixed). On the deadline: CANCEL_WAIT, so the connection stays in step, then
  /// StoreTimeout "store H:P: <what> timed out after <shown>[<why>]".
  void wait(const std::vector<std::string>& keys, milliseconds timeout, const std::string& what,
            milliseconds shown, std::string_view why) {
    Deadline deadline = send(make_request(wire::Op::wait, keys), timeout);
    if (socket_.try_fill(1, deadline)) {
      expect_byte(static_cast<std::uint8_t>(*socket_.take(1)), wire::kStopWaiting, "WAIT reply");
      return;
    }
    std::string message =
        "store " + address + ": " + what + " timed out after " + describe_duration(shown) + std::string(why);
    if (dialect_ == wire::Dialect::legacy) {
      // 1.13 has no CANCEL_WAIT (it would reset the connection): the WAIT's late answer could be taken
      // for the next request's, so the connection goes; the next call reconnects.
      socket_.close();
      throw StoreTimeout(message);
    }
    try {
      Deadline cancel =
          send(make_request(wire::Op::cancel_wait), std::min(options.timeout, kCancelWaitTimeout), /*mid_exchange=*/true);
      std::uint8_t reply = read_u8(cancel);
      // The keys may have come just as we gave up: the STOP_WAITING is then ahead of WAIT_CANCELED.
      // The caller's deadline has passed all the same, so this stays a timeout (as in PyTorch).
      if (reply == wire::kStopWaiting) reply = read_u8(cancel);
      expect_byte(reply, wire::kWaitCanceled, "CANCEL_WAIT reply");
    } catch (const CallFailed& failed) {
      throw StoreTimeout(message + "; then CANCEL_WAIT " + (failed.timed_out ? "" : "failed: ") + failed.reason);
    }
    throw StoreTimeout(message);
  }

  std::uint32_t random_u32() { return static_cast<std::uint32_t>(rng_()); }

  /// Any thread (the store's dialect changes at most once, at a connect).
  wire::Dialect dialect() const { return dialect_.load(); }

  /// Not under the mutex: the call it interrupts holds it.
  void interrupt() { socket_.interrupt(); }

 private:
  /// The request's bytes in the connection's dialect; CallFailed when that dialect lacks the op.
  std::string encode(const wire::Request& request) const {
    if (!wire::op_code(dialect_, request.op)) {
      throw CallFailed{"the store speaks PyTorch 1.13's protocol, which has no " +
                       std::string(wire::op_name(request.op))};
    }
    return wire::encode_request(dialect_, request);
  }

  void check_limits(const wire::Request& request) const {
    const wire::Limits& limits = options.limits;
    if (request.keys.size() > limits.max_keys_per_request) {
      throw CallFailed{std::to_string(request.keys.size()) + " keys, over the limit of " +
                       std::to_string(limits.max_keys_per_request) + " per request"};
    }
    for (const auto& key : request.keys) {
      if (key.size() > limits.max_key_bytes) {
        throw CallFailed{"the key is " + std::to_string(key.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_key_bytes)};
      }
    }
    for (const auto& value : request.values) {
      if (value.size() > limits.max_value_bytes) {
        throw CallFailed{"the value is " + std::to_string(value.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_value_bytes)};
      }
    }
  }

  /// Reconnects when there is no connection, or when the store closed it while we were idle (a
  /// restarted store, StoreServer::clear()): nothing was sent yet, so starting over is safe.
  void ensure_connected() {
    if (!socket_.usable_between_calls()) connect_with_retry();
  }

  void connect_with_retry() {
    const Deadline deadline = deadline_after(options.connect_timeout);
    milliseconds backoff = kFirstBackoff;
    std::string last_error = "no attempt within the time";
    for (;;) {
      try {
        socket_.connect(options.host, options.port, deadline);
        handshake(deadline);
        return;
      } catch (const CallFailed& failed) {
        // Refused, unreachable, not resolvable, or closed in the handshake: the store may not be up
        // yet. (A rejected token is a StoreError and is not retried: it would not change.)
        last_error = failed.reason;
      }
      if (socket_.interrupted()) throw StoreError("store " + address + ": interrupted");
      auto now = Clock::now();
      if (now >= deadline.at) break;
      std::this_thread::sleep_for(std::min<Clock::duration>(jittered(backoff), deadline.at - now));
      if (Clock::now() >= deadline.at) break;
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
    throw StoreError("cannot reach the store at " + address + " within " +
                     describe_duration(options.connect_timeout) + ": " + last_error);
  }

  /// +-25% so that thousands of clients that failed together do not retry together.
  milliseconds jittered(milliseconds base) {
    std::uniform_real_distribution<double> factor(0.75, 1.25);
    return milliseconds(static_cast<milliseconds::rep>(static_cast<double>(base.count()) * factor(rng_)));
  }

  /// VALIDATE and PING in one write; then AUTH_CHALLENGE with a token, or else GETNUMKEYS as a probe.
  /// The probe is there because a store that requires a token closes the connection at the first
  /// request that is not part of the handshake, and a SET (no reply) would be lost without an error:
  /// better to say at connect time that the store wants a token. Neither is pipelined with the PING:
  /// a store that closes a connection may drop the replies it owed, and the PING's reply is what
  /// tells "the store refused us" from "the store closed at once" (at its connection limit: retried).
  void handshake(const Deadline& deadline) {
    if (dialect_ == wire::Dialect::legacy) {
      legacy_probe(deadline);
      return;
    }
    wire::Request ping = make_request(wire::Op::ping);
    ping.number = random_u32();
    socket_.write_all(wire::encode_request(wire::Dialect::current, make_request(wire::Op::validate)) +
                          wire::encode_request(wire::Dialect::current, ping),
                      deadline);
    std::uint32_t echoed = 0;
    try {
      echoed = read_u32(deadline);
    } catch (const CallFailed& failed) {
      if (!failed.timed_out && options.legacy_fallback && !options.token) {
        try_legacy_dialect(failed, deadline);
        return;
      }
      // Retried: a store at its connection limit accepts and closes at once.
      throw CallFailed{failed.reason + " (in the handshake)", failed.timed_out};
    }
    if (echoed != ping.number) {
      socket_.close();
      throw StoreError("the peer at " + address + " is not a ddprun or PyTorch store: it answered PING with " +
                       std::to_string(echoed) + " instead of the nonce " + std::to_string(ping.number));
    }
    if (options.token) {
      authenticate(*options.token, deadline);
      return;
    }
    try {
      socket_.write_all(wire::encode_request(wire::Dialect::current, make_request(wire::Op::num_keys)), deadline);
      read_i64(deadline);
    } catch (const CallFailed& failed) {
      if (failed.timed_out) throw;
      throw StoreError("the store at " + address + " requires a token (" + failed.reason +
                       " at the first request of this client, which has none): set DDPRUN_STORE_TOKEN or " +
                       "DDPRUN_STORE_TOKEN_FILE");
    }
  }

  /// The current handshake's connection was closed (`failed`): a PyTorch 1.13 store does that to
  /// VALIDATE. A new connection in the legacy dialect, probed with GETNUMKEYS; when the store answers,
  /// the legacy dialect stays. When not, CallFailed naming both failures (retried by the caller: the
  /// store may have been at its connection limit).
  void try_legacy_dialect(const CallFailed& failed, const Deadline& deadline) {
    try {
      socket_.connect(options.host, options.port, deadline);
      legacy_probe(deadline);
    } catch (const CallFailed& legacy_failed) {
      throw CallFailed{
          failed.reason + " (in the handshake; in PyTorch 1.13's dialect too: " + legacy_failed.reason + ")",
          legacy_failed.timed_out};
    }
    dialect_ = wire::Dialect::legacy;
  }

  /// GETNUMKEYS in the legacy dialect: the store answers it, so it speaks that dialect.
  void legacy_probe(const Deadline& deadline) {
    socket_.write_all(wire::encode_request(wire::Dialect::legacy, make_request(wire::Op::num_keys)), deadline);
    read_i64(deadline);
  }

  /// The exchange in auth.hpp.
  void authenticate(const std::string& token, const Deadline& deadline) {
    std::string server_nonce;
    try {
      socket_.write_all(wire::encode_request(wire::Dialect::current, make_request(wire::Op::auth_challenge)), deadline);
      server_nonce = read_bytes(deadline, kMaxAuthFieldBytes);
    } catch (const CallFailed& failed) {
      if (failed.timed_out) throw;
      throw StoreError("the store at " + address + " refused to authenticate (" + failed.reason +
                       " at AUTH_CHALLENGE): it has no token, or it is not a ddprun store; unset " +
                       "DDPRUN_STORE_TOKEN and DDPRUN_STORE_TOKEN_FILE or give the store the same token");
    }
    if (server_nonce.size() != auth::kNonceBytes) {
      socket_.close();
      throw StoreError("the store at " + address + " sent an authentication nonce of " +
                       std::to_string(server_nonce.size()) + " bytes instead of " + std::to_string(auth::kNonceBytes));
    }
    std::string client_nonce = auth::random_nonce();
    std::string proof;
    try {
      socket_.write_all(
          wire::encode_request(wire::Dialect::current,
                               make_request(wire::Op::auth_response, {},
                                            {auth::client_proof(token, server_nonce, client_nonce), client_nonce})),
          deadline);
      expect_byte(read_u8(deadline), 1, "AUTH_RESPONSE reply");
      proof = read_bytes(deadline, kMaxAuthFieldBytes);
    } catch (const CallFailed& failed) {
      if (failed.timed_out) throw;
      throw StoreError("the store at " + address + " rejected the token (" + failed.reason +
                       "): check that DDPRUN_STORE_TOKEN or DDPRUN_STORE_TOKEN_FILE gives the store's token");
    }
    if (!auth::equal_constant_time(proof, auth::server_proof(token, server_nonce, client_nonce))) {
      socket_.close();
      throw StoreError("the store at " + address + " could not prove it knows the token");
    }
  }

  std::mutex mutex_;
  DeadlineSocket socket_;
  /// Current until a legacy_fallback finds a store that answers only the legacy dialect.
  std::atomic<wire::Dialect> dialect_{wire::Dialect::current};
  std::minstd_rand rng_;
};

StoreClient::StoreClient(StoreClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  if (!impl_->options.defer_connect) impl_->connect();
}

void StoreClient::connect() {
  impl_->call("connecting", [&] { impl_->ensure_connected_now(); });
}

StoreClient::~StoreClient() = default;

std::string StoreClient::address() const { return impl_->address; }

void StoreClient::interrupt() { impl_->interrupt(); }

void StoreClient::set(std::string_view key, std::string_view value) {
  std::string k = prefixed(key);
  impl_->call("SET for " + describe_key(k), [&] {
    impl_->send(make_request(wire::Op::set, {k}, {std::string(value)}), impl_->options.timeout);
  });
}

std::string StoreClient::get(std::string_view key) { return get(key, impl_->options.timeout); }

std::string StoreClient::get(std::string_view key, std::chrono::milliseconds timeout) {
  std::string k = prefixed(key);
  std::string what = "GET for " + describe_key(k);
  return impl_->call(what, [&] {
    impl_->wait({k}, timeout, what, timeout, " waiting for the key to be set");
    return impl_->read_value(impl_->send(make_request(wire::Op::get, {k}), impl_->options.timeout));
  });
}

std::int64_t StoreClient::add(std::string_view key, std::int64_t delta) {
  std::string k = prefixed(key);
  return impl_->call("ADD for " + describe_key(k), [&] {
    wire::Request request = make_request(wire::Op::add, {k});
    request.delta = delta;
    return impl_->read_i64(impl_->send(request, impl_->options.timeout));
  });
}

std::string StoreClient::compare_set(std::string_view key, std::string_view expected, std::string_view desired) {
  std::string k = prefixed(key);
  return impl_->call("COMPARE_SET for " + describe_key(k), [&] {
    return impl_->read_value(impl_->send(
        make_request(wire::Op::compare_set, {k}, {std::string(expected), std::string(desired)}),
        impl_->options.timeout));
  });
}

bool StoreClient::check(const std::vector<std::string>& keys) {
  std::vector<std::string> ks = prefixed(keys);
  return impl_->call("CHECK for " + describe_keys(ks), [&] {
    std::uint8_t reply = impl_->read_u8(impl_->send(make_request(wire::Op::check, ks), impl_->options.timeout));
    if (reply != wire::kCheckReady && reply != wire::kCheckNotReady) {
      impl_->fail_protocol("CHECK reply " + std::to_string(reply));
    }
    return reply == wire::kCheckReady;
  });
}

void StoreClient::wait(const std::vector<std::string>& keys) { wait(keys, impl_->options.timeout); }

void StoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> ks = prefixed(keys);
  std::string what = "WAIT for " + describe_keys(ks);
  impl_->call(what, [&] { impl_->wait(ks, timeout, what, timeout, ""); });
}

std::int64_t StoreClient::num_keys() {
  return impl_->call("GETNUMKEYS", [&] {
    return impl_->read_i64(impl_->send(make_request(wire::Op::num_keys), impl_->options.timeout));
  });
}

bool StoreClient::delete_key(std::string_view key) {
  std::string k = prefixed(key);
  return impl_->call("DELETE_KEY for " + describe_key(k), [&] {
    return impl_->read_i64(impl_->send(make_request(wire::Op::delete_key, {k}), impl_->options.timeout)) > 0;
  });
}

void StoreClient::append(std::string_view key, std::string_view value) {
  std::string k = prefixed(key);
  impl_->call("APPEND for " + describe_key(k), [&] {
    impl_->send(make_request(wire::Op::append, {k}, {std::string(value)}), impl_->options.timeout);
  });
}

std::vector<std::string> StoreClient::multi_get(const std::vector<std::string>& keys) {
  std::vector<std::string> ks = prefixed(keys);
  std::string what = "MULTI_GET for " + describe_keys(ks);
  return impl_->call(what, [&] {
    // As PyTorch: wait for all the keys first, since the server cannot answer for a missing one.
    impl_->wait(ks, impl_->options.timeout, what, impl_->options.timeout, " waiting for the keys to be set");
    std::vector<std::string> values;
    values.reserve(ks.size());
    if (impl_->dialect() == wire::Dialect::legacy) {  // 1.13 has no MULTI_GET
      for (const auto& k : ks) {
        values.push_back(impl_->read_value(impl_->send(make_request(wire::Op::get, {k}), impl_->options.timeout)));
      }
      return values;
    }
    Deadline deadline = impl_->send(make_request(wire::Op::multi_get, ks), impl_->options.timeout);
    for (std::size_t i = 0; i < ks.size(); ++i) values.push_back(impl_->read_value(deadline));
    return values;
  });
}

void StoreClient::multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  if (keys.size() != values.size()) {
    throw std::invalid_argument("StoreClient::multi_set: " + std::to_string(keys.size()) + " keys but " +
                                std::to_string(values.size()) + " values");
  }
  std::vector<std::string> ks = prefixed(keys);
  impl_->call("MULTI_SET for " + describe_keys(ks), [&] {
    if (impl_->dialect() == wire::Dialect::legacy) {  // 1.13 has no MULTI_SET
      for (std::size_t i = 0; i < ks.size(); ++i) {
        impl_->send(make_request(wire::Op::set, {ks[i]}, {values[i]}), impl_->options.timeout);
      }
      return;
    }
    impl_->send(make_request(wire::Op::multi_set, ks, values), impl_->options.timeout);
  });
}

void StoreClient::queue_push(std::string_view key, std::string_view value) {
  std::string k = prefixed(key);
  impl_->call("QUEUE_PUSH for " + describe_key(k), [&] {
    impl_->send(make_request(wire::Op::queue_push, {k}, {std::string(value)}), impl_->options.timeout);
  });
}

std::string StoreClient::queue_pop(std::string_view key, std::chrono::milliseconds timeout) {
  std::string k = prefixed(key);
  std::string what = "QUEUE_POP for " + describe_key(k);
  return impl_->call(what, [&] {
    const Deadline overall = deadline_after(timeout);
    milliseconds pause{1};
    for (;;) {
      auto left = std::chrono::ceil<milliseconds>(std::max(overall.at - Clock::now(), Clock::duration::zero()));
      impl_->wait({k}, left, what, timeout, " waiting for an item");
      Deadline deadline = impl_->send(make_request(wire::Op::queue_pop, {k}), impl_->options.timeout);
      if (impl_->read_i64(deadline) > 0) return impl_->read_value(deadline);
      // Another client took the item between our WAIT and our POP. Pause before waiting again, in
      // case the store counts an empty queue as an existing key (the WAIT would not block).
      if (Clock::now() >= overall.at) {
        throw StoreTimeout("store " + address() + ": " + what + " timed out after " + describe_duration(timeout) +
                           " waiting for an item");
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, overall.at - Clock::now()));
      pause = std::min(pause * 2, milliseconds(100));
    }
  });
}

std::int64_t StoreClient::queue_len(std::string_view key) {
  std::string k = prefixed(key);
  return impl_->call("QUEUE_LEN for " + describe_key(k), [&] {
    return impl_->read_i64(impl_->send(make_request(wire::Op::queue_len, {k}), impl_->options.timeout));
  });
}

wire::Dialect StoreClient::dialect() const { return impl_->dialect(); }

void StoreClient::ping() {
  impl_->call("PING", [&] {
    wire::Request request = make_request(wire::Op::ping);
    request.number = impl_->random_u32();
    std::uint32_t echoed = impl_->read_u32(impl_->send(request, impl_->options.timeout));
    if (echoed != request.number) impl_->fail_protocol("the nonce " + std::to_string(echoed) + " (not ours)");
  });
}

}  // namespace ddprun::rendezvous

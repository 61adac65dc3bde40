#include "rendezvous/async_store_client.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <type_traits>

#include "rendezvous/auth.hpp"
#include "rendezvous/deadline.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/store_error.hpp"

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Two g++ 12 coroutine bugs shape this file: a co_await as an if condition ("if (co_await f())")
// resumes a frame twice (a crash), and a braced list inside a co_await expression ("co_await
// f({k})") does not compile ("array used as initializer"). So results go to a local first, and
// requests and key lists are built before the co_await.

namespace ddprun::rendezvous {
namespace {

constexpr milliseconds kFirstBackoff{10};
constexpr milliseconds kMaxBackoff{1000};
/// After a wait timed out, how long CANCEL_WAIT may take: a store that answers nothing must not turn
/// a 5 s wait into the default 300 s one.
constexpr milliseconds kCancelWaitTimeout{10000};
constexpr std::size_t kReadChunk = 64 * 1024;
/// Larger read buffers (left by a large value) are given back after the call that needed them.
constexpr std::size_t kKeptBufferBytes = 1024 * 1024;

/// A failed step of a call, internal to this file: the reason is "timed out after 30 s" (timed_out)
/// or what went wrong, e.g. "the store closed the connection". The call that caught it throws
/// StoreTimeout("store H:P: <what> timed out after 30 s") or StoreError("store H:P: <what> failed:
/// <reason>") instead: this type never leaves the file.
class CallFailed : public std::runtime_error {
 public:
  explicit CallFailed(const std::string& reason, bool timed_out = false)
      : std::runtime_error(reason), timed_out_(timed_out) {}
  std::string reason() const { return what(); }
  bool timed_out() const { return timed_out_; }

 private:
  bool timed_out_;
};

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

wire::Request make_request(wire::Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  wire::Request request;
  request.op = op;
  request.keys = std::move(keys);
  request.values = std::move(values);
  return request;
}

/// What a call is about, as its messages name it: "SET for \"/k\"", "WAIT for \"/a\", \"/b\"",
/// "GETNUMKEYS". Holds the prefixed keys the request sends; the text is made only for a message.
struct Subject {
  std::string_view op;
  std::vector<std::string> keys;
  enum class Shown { none, key, keys } shown = Shown::none;

  static Subject named(std::string_view op) { return {op, {}, Shown::none}; }
  static Subject key(std::string_view op, std::string_view key) { return {op, {prefixed(key)}, Shown::key}; }
  static Subject keys_of(std::string_view op, const std::vector<std::string>& keys) {
    return {op, prefixed(keys), Shown::keys};
  }

  std::string text() const {
    std::string out(op);
    if (shown == Shown::key) out += " for " + describe_key(keys.front());
    if (shown == Shown::keys) out += " for " + describe_keys(keys);
    return out;
  }
};

std::string describe_io_error(const boost::system::error_code& ec) {
  if (ec == asio::error::eof) return "the store closed the connection";
  if (ec == asio::error::connection_reset) return "the store reset the connection";
  return ec.message();
}

}  // namespace

/// The connection and the protocol: socket, read buffer, deadline actor, retry, handshake,
/// authentication and the calls. Shared by the client and its pending operation (each operation's
/// coroutine holds a shared_ptr), so that destroying the client never leaves a coroutine with a
/// dangling object.
class AsyncStoreClient::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(asio::any_io_executor executor, StoreClientOptions options_in, Loop loop)
      : options(std::move(options_in)),
        address(format_endpoint(without_brackets(options.host), options.port)),
        executor_(executor),
        loop_(loop),
        socket_(executor),
        timer_(executor),
        pause_timer_(executor),
        rng_(std::random_device{}()) {
    options.host = std::string(without_brackets(options.host));  // "[::1]" is accepted for "::1", as in URLs
    // No read buffer yet: make_room() allocates it at the first read, on the thread that runs the
    // client's loop. Made here, 1024 clients built by one thread put 64 MiB in that thread's malloc
    // arena, and every loop thread later frees its grown buffer into that one arena (its lock).
  }

  StoreClientOptions options;
  const std::string address;
  /// Current until a legacy_fallback finds a store that answers only the legacy dialect.
  wire::Dialect dialect = wire::Dialect::current;

  /// See AsyncStoreClient::cancel().
  void cancel() {
    interrupted_ = true;
    close();
    if (resolver_) resolver_->cancel();
    timer_.cancel();
    timer_armed_ = false;
    pause_timer_.cancel();
  }

  void close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
    begin_ = end_ = 0;
  }

  // ------------------------------------------------------------------------------------- calls
  // Each is static and takes the session by shared_ptr: the coroutine's frame then holds it.

  /// Runs `body(session, subject)` as the client's one operation: std::logic_error when another is
  /// pending; a CallFailed becomes StoreError/StoreTimeout naming the subject. The subject (with the
  /// prefixed keys) lives in this frame, so the body reads it by reference; its text is only made
  /// for a message.
  template <class T, class Body>
  static Task<T> call(std::shared_ptr<Session> self, Subject subject, Body body) {
    Busy busy(*self);
    try {
      if constexpr (std::is_void_v<T>) {
        co_await body(*self, subject);
        co_return;
      } else {
        co_return co_await body(*self, subject);
      }
    } catch (const CallFailed& failed) {
      self->throw_store_error(subject, failed);
    }
  }

  static Task<void> connect(std::shared_ptr<Session> self) {
    return call<void>(std::move(self), Subject::named("connecting"), [](Session& s, const Subject&) -> Task<void> {
      if (!s.usable_between_calls()) co_await s.connect_with_retry();
    });
  }

  static Task<void> set(std::shared_ptr<Session> self, std::string key, std::string value) {
    return call<void>(std::move(self), Subject::key("SET", key),
                      [value = std::move(value)](Session& s, const Subject& subject) -> Task<void> {
                        const wire::Request request = make_request(wire::Op::set, subject.keys, {value});
                        co_await s.send(request, s.options.timeout);
                      });
  }

  static Task<std::string> get(std::shared_ptr<Session> self, std::string key, milliseconds timeout) {
    return call<std::string>(std::move(self), Subject::key("GET", key),
                             [timeout](Session& s, const Subject& subject) -> Task<std::string> {
                               co_await s.wait_for_keys(subject, timeout, timeout, " waiting for the key to be set");
                               const wire::Request request = make_request(wire::Op::get, subject.keys);
                               wire::Reply reply = co_await s.round_trip(request);
                               co_return std::move(reply.values.front());
                             });
  }

  static Task<std::int64_t> add(std::shared_ptr<Session> self, std::string key, std::int64_t delta) {
    return call<std::int64_t>(std::move(self), Subject::key("ADD", key),
                              [delta](Session& s, const Subject& subject) -> Task<std::int64_t> {
                                wire::Request request = make_request(wire::Op::add, subject.keys);
                                request.delta = delta;
                                wire::Reply reply = co_await s.round_trip(request);
                                co_return reply.number;
                              });
  }

  static Task<std::string> compare_set(std::shared_ptr<Session> self, std::string key, std::string expected,
                                       std::string desired) {
    return call<std::string>(
        std::move(self), Subject::key("COMPARE_SET", key),
        [expected = std::move(expected), desired = std::move(desired)](Session& s,
                                                                        const Subject& subject) -> Task<std::string> {
          const wire::Request request = make_request(wire::Op::compare_set, subject.keys, {expected, desired});
          wire::Reply reply = co_await s.round_trip(request);
          co_return std::move(reply.values.front());
        });
  }

  static Task<bool> check(std::shared_ptr<Session> self, std::vector<std::string> keys) {
    return call<bool>(std::move(self), Subject::keys_of("CHECK", keys), [](Session& s, const Subject& subject) -> Task<bool> {
      const wire::Request request = make_request(wire::Op::check, subject.keys);
      wire::Reply reply = co_await s.round_trip(request);
      co_return reply.number == wire::kCheckReady;
    });
  }

  static Task<void> wait(std::shared_ptr<Session> self, std::vector<std::string> keys, milliseconds timeout) {
    return call<void>(std::move(self), Subject::keys_of("WAIT", keys),
                      [timeout](Session& s, const Subject& subject) -> Task<void> {
                        co_await s.wait_for_keys(subject, timeout, timeout, "");
                      });
  }

  static Task<std::vector<std::string>> multi_get(std::shared_ptr<Session> self, std::vector<std::string> keys,
                                                  milliseconds timeout) {
    return call<std::vector<std::string>>(
        std::move(self), Subject::keys_of("MULTI_GET", keys),
        [timeout](Session& s, const Subject& subject) -> Task<std::vector<std::string>> {
          // As PyTorch: wait for all the keys first, since the server cannot answer for a missing one.
          co_await s.wait_for_keys(subject, timeout, timeout, " waiting for the keys to be set");
          std::vector<std::string> values;
          if (s.dialect == wire::Dialect::legacy) {  // 1.13 has no MULTI_GET
            values.reserve(subject.keys.size());
            for (const auto& k : subject.keys) {
              const wire::Request request = make_request(wire::Op::get, {k});
              wire::Reply reply = co_await s.round_trip(request);
              values.push_back(std::move(reply.values.front()));
            }
            co_return values;
          }
          const wire::Request request = make_request(wire::Op::multi_get, subject.keys);
          wire::Reply reply = co_await s.round_trip(request);
          co_return std::move(reply.values);
        });
  }

  static Task<std::int64_t> num_keys(std::shared_ptr<Session> self) {
    return call<std::int64_t>(std::move(self), Subject::named("GETNUMKEYS"),
                              [](Session& s, const Subject&) -> Task<std::int64_t> {
                                const wire::Request request = make_request(wire::Op::num_keys);
                                wire::Reply reply = co_await s.round_trip(request);
                                co_return reply.number;
                              });
  }

  static Task<bool> delete_key(std::shared_ptr<Session> self, std::string key) {
    return call<bool>(std::move(self), Subject::key("DELETE_KEY", key), [](Session& s, const Subject& subject) -> Task<bool> {
      const wire::Request request = make_request(wire::Op::delete_key, subject.keys);
      wire::Reply reply = co_await s.round_trip(request);
      co_return reply.number > 0;
    });
  }

  static Task<void> append(std::shared_ptr<Session> self, std::string key, std::string value) {
    return call<void>(std::move(self), Subject::key("APPEND", key),
                      [value = std::move(value)](Session& s, const Subject& subject) -> Task<void> {
                        const wire::Request request = make_request(wire::Op::append, subject.keys, {value});
                        co_await s.send(request, s.options.timeout);
                      });
  }

  static Task<void> multi_set(std::shared_ptr<Session> self, std::vector<std::string> keys,
                              std::vector<std::string> values) {
    if (keys.size() != values.size()) {
      throw std::invalid_argument("StoreClient::multi_set: " + std::to_string(keys.size()) + " keys but " +
                                  std::to_string(values.size()) + " values");
    }
    return call<void>(std::move(self), Subject::keys_of("MULTI_SET", keys),
                      [values = std::move(values)](Session& s, const Subject& subject) -> Task<void> {
                        if (s.dialect == wire::Dialect::legacy) {  // 1.13 has no MULTI_SET
                          for (std::size_t i = 0; i < subject.keys.size(); ++i) {
                            const wire::Request request = make_request(wire::Op::set, {subject.keys[i]}, {values[i]});
                            co_await s.send(request, s.options.timeout);
                          }
                          co_return;
                        }
                        const wire::Request request = make_request(wire::Op::multi_set, subject.keys, values);
                        co_await s.send(request, s.options.timeout);
                      });
  }

  static Task<void> queue_push(std::shared_ptr<Session> self, std::string key, std::string value) {
    return call<void>(std::move(self), Subject::key("QUEUE_PUSH", key),
                      [value = std::move(value)](Session& s, const Subject& subject) -> Task<void> {
                        const wire::Request request = make_request(wire::Op::queue_push, subject.keys, {value});
                        co_await s.send(request, s.options.timeout);
                      });
  }

  static Task<std::string> queue_pop(std::shared_ptr<Session> self, std::string key, milliseconds timeout) {
    return call<std::string>(
        std::move(self), Subject::key("QUEUE_POP", key), [timeout](Session& s, const Subject& subject) -> Task<std::string> {
          const Deadline overall = deadline_after(timeout);
          const wire::Request pop = make_request(wire::Op::queue_pop, subject.keys);
          milliseconds pause{1};
          for (;;) {
            auto left = std::chrono::ceil<milliseconds>(std::max(overall.at - Clock::now(), Clock::duration::zero()));
            co_await s.wait_for_keys(subject, left, timeout, " waiting for an item");
            wire::Reply popped = co_await s.round_trip(pop);
            if (popped.number > 0) co_return std::move(popped.values.front());
            // Another client took the item between our WAIT and our POP. Pause before waiting again,
            // in case the store counts an empty queue as an existing key (the WAIT would not block).
            if (Clock::now() >= overall.at) {
              throw StoreTimeout("store " + s.address + ": " + subject.text() + " timed out after " +
                                 describe_duration(timeout) + " waiting for an item");
            }
            co_await s.pause(std::min<Clock::duration>(pause, overall.at - Clock::now()));
            pause = std::min(pause * 2, milliseconds(100));
          }
        });
  }

  static Task<std::int64_t> queue_len(std::shared_ptr<Session> self, std::string key) {
    return call<std::int64_t>(std::move(self), Subject::key("QUEUE_LEN", key),
                              [](Session& s, const Subject& subject) -> Task<std::int64_t> {
                                const wire::Request request = make_request(wire::Op::queue_len, subject.keys);
                                wire::Reply reply = co_await s.round_trip(request);
                                co_return reply.number;
                              });
  }

  static Task<void> ping(std::shared_ptr<Session> self) {
    return call<void>(std::move(self), Subject::named("PING"), [](Session& s, const Subject&) -> Task<void> {
      wire::Request request = make_request(wire::Op::ping);
      request.number = s.random_u32();
      wire::Reply reply = co_await s.round_trip(request);
      auto echoed = static_cast<std::uint32_t>(reply.number);
      if (echoed != request.number) s.fail_protocol("the nonce " + std::to_string(echoed) + " (not ours)");
    });
  }

 private:
  /// Marks the one pending operation (see "One operation at a time" in the header).
  class Busy {
   public:
    explicit Busy(Session& session) : session_(session) {
      if (session_.busy_) {
        throw std::logic_error("AsyncStoreClient for " + session_.address +
                               ": a call started while another is pending (one operation at a time per client)");
      }
      session_.busy_ = true;
    }
    ~Busy() {
      session_.busy_ = false;
      if (session_.loop_ == Loop::shared) session_.stop_watching();
    }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    Session& session_;
  };

  [[noreturn]] void throw_store_error(const Subject& subject, const CallFailed& failed) const {
    std::string message =
        "store " + address + ": " + subject.text() + (failed.timed_out() ? " " : " failed: ") + failed.reason();
    if (failed.timed_out()) throw StoreTimeout(message);
    throw StoreError(message);
  }

  // ----------------------------------------------------------------------------- the protocol

  /// Sends `request` and reads its reply, with the options' timeout.
  Task<wire::Reply> round_trip(const wire::Request& request) {
    Deadline deadline = co_await send(request, options.timeout);
    co_return co_await read_reply(request.op, deadline, request.keys.size());
  }

  /// Checks `request` against the limits (no I/O when it is over them), reconnects when the
  /// connection is gone (unless `mid_exchange`: a reply of ours may be on its way, a new connection
  /// would lose it), and sends it. Returns the deadline of the reply.
  Task<Deadline> send(const wire::Request& request, milliseconds timeout, bool mid_exchange = false) {
    check_limits(request);
    std::string bytes = encode(request);
    if (bytes.size() > options.limits.max_request_bytes) {
      throw CallFailed("the request is " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                       std::to_string(options.limits.max_request_bytes));
    }
    if (!mid_exchange && !usable_between_calls()) {
      const wire::Dialect before = dialect;
      co_await connect_with_retry();
      if (dialect != before) bytes = encode(request);  // this connection fell back to the legacy dialect
    }
    Deadline deadline = deadline_after(timeout);
    std::string_view rest = bytes;
    if (!write_now(rest)) co_await write_all(rest, deadline);
    co_return deadline;
  }

  /// Reads the reply to `op` (see wire::decode_reply) by `deadline`; an invalid one closes the
  /// connection.
  Task<wire::Reply> read_reply(wire::Op op, const Deadline& deadline, std::size_t keys = 0) {
    for (;;) {
      wire::DecodedReply decoded = wire::decode_reply(op, buffered(), options.limits, keys);
      if (decoded.status == wire::DecodeStatus::complete) {
        consume(decoded.consumed);
        co_return std::move(decoded.reply);
      }
      if (decoded.status == wire::DecodeStatus::invalid) fail_protocol(decoded.error);
      // Read here rather than in fill(): one coroutine frame less per reply.
      while (end_ - begin_ < decoded.need_at_least) {
        boost::system::error_code ec;
        auto space = prepare_read(decoded.need_at_least, deadline);
        std::size_t got = co_await socket_.async_read_some(space, asio::redirect_error(asio::use_awaitable, ec));
        if (!finish_read(ec, got)) throw_read_timeout(deadline);
      }
    }
  }

  /// The connection is out of step: close it so the next call starts over.
  [[noreturn]] void fail_protocol(const std::string& what) {
    close();
    throw CallFailed("the store answered with " + what + " (the connection is closed)");
  }

  /// WAIT for the subject's keys. On the deadline: CANCEL_WAIT, so the connection stays in step, then
  /// StoreTimeout "store H:P: <subject> timed out after <shown>[<why>]".
  Task<void> wait_for_keys(const Subject& subject, milliseconds timeout, milliseconds shown, std::string_view why) {
    const wire::Request request = make_request(wire::Op::wait, subject.keys);
    Deadline deadline = co_await send(request, timeout);
    const bool answered = co_await try_fill(1, deadline);
    if (answered) {
      co_await read_reply(wire::Op::wait, deadline);
      co_return;
    }
    std::string message =
        "store " + address + ": " + subject.text() + " timed out after " + describe_duration(shown) + std::string(why);
    if (dialect == wire::Dialect::legacy) {
      // 1.13 has no CANCEL_WAIT (it would reset the connection): the WAIT's late answer could be taken
      // for the next request's, so the connection goes; the next call reconnects.
      close();
      throw StoreTimeout(message);
    }
    try {
      Deadline cancel = co_await send(make_request(wire::Op::cancel_wait), std::min(options.timeout, kCancelWaitTimeout),
                                      /*mid_exchange=*/true);
      // The keys may have come just as we gave up: the STOP_WAITING is then ahead of WAIT_CANCELED.
      // The caller's deadline has passed all the same, so this stays a timeout (as in PyTorch).
      co_await fill(1, cancel);
      wire::DecodedReply stop = wire::decode_reply(wire::Op::wait, buffered(), options.limits);
      if (stop.status == wire::DecodeStatus::complete) consume(stop.consumed);
      co_await read_reply(wire::Op::cancel_wait, cancel);
    } catch (const CallFailed& failed) {
      throw StoreTimeout(message + "; then CANCEL_WAIT " + (failed.timed_out() ? "" : "failed: ") + failed.reason());
    }
    throw StoreTimeout(message);
  }

  std::uint32_t random_u32() { return static_cast<std::uint32_t>(rng_()); }

  /// The request's bytes in the connection's dialect; CallFailed when that dialect lacks the op.
  std::string encode(const wire::Request& request) const {
    if (!wire::op_code(dialect, request.op)) {
      throw CallFailed("the store speaks PyTorch 1.13's protocol, which has no " +
                       std::string(wire::op_name(request.op)));
    }
    return wire::encode_request(dialect, request);
  }

  void check_limits(const wire::Request& request) const {
    const wire::Limits& limits = options.limits;
    if (request.keys.size() > limits.max_keys_per_request) {
      throw CallFailed(std::to_string(request.keys.size()) + " keys, over the limit of " +
                       std::to_string(limits.max_keys_per_request) + " per request");
    }
    for (const auto& key : request.keys) {
      if (key.size() > limits.max_key_bytes) {
        throw CallFailed("the key is " + std::to_string(key.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_key_bytes));
      }
    }
    for (const auto& value : request.values) {
      if (value.size() > limits.max_value_bytes) {
        throw CallFailed("the value is " + std::to_string(value.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_value_bytes));
      }
    }
  }

  // ------------------------------------------------------------------ connecting, handshake

  Task<void> connect_with_retry() {
    const Deadline deadline = deadline_after(options.connect_timeout);
    milliseconds backoff = kFirstBackoff;
    std::string last_error = "no attempt within the time";
    for (;;) {
      try {
        co_await connect_socket(deadline);
        co_await handshake(deadline);
        co_return;
      } catch (const CallFailed& failed) {
        // Refused, unreachable, not resolvable, or closed in the handshake: the store may not be up
        // yet. (A rejected token is a StoreError and is not retried: it would not change.)
        last_error = failed.reason();
      }
      if (interrupted_) throw StoreError("store " + address + ": interrupted");
      auto now = Clock::now();
      if (now >= deadline.at) break;
      co_await pause(std::min<Clock::duration>(jittered(backoff), deadline.at - now));
      if (interrupted_) throw StoreError("store " + address + ": interrupted");
      if (Clock::now() >= deadline.at) break;
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
    throw StoreError("cannot reach the store at " + address + " within " + describe_duration(options.connect_timeout) +
                     ": " + last_error);
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
  Task<void> handshake(const Deadline& deadline) {
    if (dialect == wire::Dialect::legacy) {
      co_await legacy_probe(deadline);
      co_return;
    }
    wire::Request ping = make_request(wire::Op::ping);
    ping.number = random_u32();
    const std::string hello = wire::encode_request(wire::Dialect::current, make_request(wire::Op::validate)) +
                              wire::encode_request(wire::Dialect::current, ping);
    co_await write_all(hello, deadline);
    std::int64_t echoed = 0;
    std::optional<CallFailed> closed;  // the handshake's connection was closed: maybe a 1.13 store
    try {
      echoed = (co_await read_reply(wire::Op::ping, deadline)).number;
    } catch (const CallFailed& failed) {
      if (failed.timed_out() || !options.legacy_fallback || options.token) {
        // Retried: a store at its connection limit accepts and closes at once.
        throw CallFailed(failed.reason() + " (in the handshake)", failed.timed_out());
      }
      closed = failed;
    }
    if (closed) {
      co_await try_legacy_dialect(*closed, deadline);
      co_return;
    }
    if (echoed != ping.number) {
      close();
      throw StoreError("the peer at " + address + " is not a ddprun or PyTorch store: it answered PING with " +
                       std::to_string(echoed) + " instead of the nonce " + std::to_string(ping.number));
    }
    if (options.token) {
      co_await authenticate(*options.token, deadline);
      co_return;
    }
    try {
      co_await write_all(wire::encode_request(wire::Dialect::current, make_request(wire::Op::num_keys)), deadline);
      co_await read_reply(wire::Op::num_keys, deadline);
    } catch (const CallFailed& failed) {
      if (failed.timed_out()) throw;
      throw StoreError("the store at " + address + " requires a token (" + failed.reason() +
                       " at the first request of this client, which has none): set DDPRUN_STORE_TOKEN or " +
                       "DDPRUN_STORE_TOKEN_FILE");
    }
  }

  /// The current handshake's connection was closed (`failed`): a PyTorch 1.13 store does that to
  /// VALIDATE. A new connection in the legacy dialect, probed with GETNUMKEYS; when the store answers,
  /// the legacy dialect stays. When not, CallFailed naming both failures (retried by the caller: the
  /// store may have been at its connection limit).
  Task<void> try_legacy_dialect(CallFailed failed, const Deadline& deadline) {
    try {
      co_await connect_socket(deadline);
      co_await legacy_probe(deadline);
    } catch (const CallFailed& legacy_failed) {
      throw CallFailed(
          failed.reason() + " (in the handshake; in PyTorch 1.13's dialect too: " + legacy_failed.reason() + ")",
          legacy_failed.timed_out());
    }
    dialect = wire::Dialect::legacy;
  }

  /// GETNUMKEYS in the legacy dialect: the store answers it, so it speaks that dialect.
  Task<void> legacy_probe(const Deadline& deadline) {
    co_await write_all(wire::encode_request(wire::Dialect::legacy, make_request(wire::Op::num_keys)), deadline);
    co_await read_reply(wire::Op::num_keys, deadline);
  }

  /// The exchange in auth.hpp.
  Task<void> authenticate(const std::string& token, const Deadline& deadline) {
    std::string server_nonce;
    try {
      co_await write_all(wire::encode_request(wire::Dialect::current, make_request(wire::Op::auth_challenge)), deadline);
      server_nonce = std::move((co_await read_reply(wire::Op::auth_challenge, deadline)).values.front());
    } catch (const CallFailed& failed) {
      if (failed.timed_out()) throw;
      throw StoreError("the store at " + address + " refused to authenticate (" + failed.reason() +
                       " at AUTH_CHALLENGE): it has no token, or it is not a ddprun store; unset " +
                       "DDPRUN_STORE_TOKEN and DDPRUN_STORE_TOKEN_FILE or give the store the same token");
    }
    if (server_nonce.size() != auth::kNonceBytes) {
      close();
      throw StoreError("the store at " + address + " sent an authentication nonce of " +
                       std::to_string(server_nonce.size()) + " bytes instead of " + std::to_string(auth::kNonceBytes));
    }
    std::string client_nonce = auth::random_nonce();
    std::string proof;
    try {
      const std::string response = wire::encode_request(
          wire::Dialect::current,
          make_request(wire::Op::auth_response, {}, {auth::client_proof(token, server_nonce, client_nonce), client_nonce}));
      co_await write_all(response, deadline);
      proof = std::move((co_await read_reply(wire::Op::auth_response, deadline)).values.front());
    } catch (const CallFailed& failed) {
      if (failed.timed_out()) throw;
      throw StoreError("the store at " + address + " rejected the token (" + failed.reason() +
                       "): check that DDPRUN_STORE_TOKEN or DDPRUN_STORE_TOKEN_FILE gives the store's token");
    }
    if (!auth::equal_constant_time(proof, auth::server_proof(token, server_nonce, client_nonce))) {
      close();
      throw StoreError("the store at " + address + " could not prove it knows the token");
    }
  }

  // ------------------------------------------------------------------------------ socket steps

  /// Closes any connection, then connects by `deadline`, with TCP_NODELAY. CallFailed: "connecting
  /// timed out" (timed_out), "cannot resolve H: ...", or the connect error.
  Task<void> connect_socket(const Deadline& deadline) {
    close();
    boost::system::error_code ec;
    std::vector<tcp::endpoint> endpoints;
    auto ip = asio::ip::make_address(options.host, ec);
    const auto port = static_cast<unsigned short>(options.port);
    if (!ec) {
      endpoints.emplace_back(ip, port);  // literal addresses, the common case, need no lookup
    } else {
      tcp::resolver::results_type results;
      if (loop_ == Loop::private_blocking) {
        results = tcp::resolver(executor_).resolve(options.host, std::to_string(port), ec);
      } else {
        if (!resolver_) resolver_.emplace(executor_);
        begin_step(deadline, /*close_on_timeout=*/false);
        results = co_await resolver_->async_resolve(options.host, std::to_string(port),
                                                    asio::redirect_error(asio::use_awaitable, ec));
        if (end_step(ec)) throw CallFailed("connecting timed out", true);
      }
      if (ec) throw CallFailed("cannot resolve " + options.host + ": " + ec.message());
      for (const auto& entry : results) endpoints.push_back(entry.endpoint());
    }
    // A timeout closes the socket rather than cancelling: a cancelled connect would go on to the
    // next address of a name, past the deadline.
    begin_step(deadline, /*close_on_timeout=*/true);
    co_await asio::async_connect(socket_, endpoints, asio::redirect_error(asio::use_awaitable, ec));
    const bool timed_out = end_step(ec);
    if (timed_out || ec == asio::error::operation_aborted) {
      close();
      throw CallFailed("connecting timed out", true);
    }
    if (ec) {
      close();
      throw CallFailed(ec.message());
    }
    // Requests are small and answered one by one: Nagle would add a delay to each.
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.non_blocking(true, ec);  // for write_now()
  }

  /// Sends all of `bytes` by `deadline`. On failure the connection is closed (a partial request may
  /// have gone out) and CallFailed is thrown: "timed out after <timeout> (sending)" or the I/O error.
  Task<void> write_all(std::string_view bytes, const Deadline& deadline) {
    if (write_now(bytes)) co_return;
    boost::system::error_code ec;
    begin_step(deadline);
    co_await asio::async_write(socket_, asio::buffer(bytes.data(), bytes.size()),
                               asio::redirect_error(asio::use_awaitable, ec));
    const bool timed_out = end_step(ec);
    if (!ec) co_return;
    close();
    if (timed_out || ec == asio::error::operation_aborted) {
      throw CallFailed("timed out after " + describe_duration(deadline.timeout) + " (sending)", true);
    }
    throw CallFailed(describe_io_error(ec));
  }

  /// Sends what the socket takes now without waiting (it is in non-blocking mode) and drops that
  /// from `bytes`; true when all went. Requests are small and the socket's buffer nearly always has
  /// room, so this usually saves the asynchronous write and its turn of the loop. CallFailed (the
  /// connection closed) on an I/O error.
  bool write_now(std::string_view& bytes) {
    throw_if_interrupted();
    boost::system::error_code ec;
    const std::size_t sent = socket_.write_some(asio::buffer(bytes.data(), bytes.size()), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) return false;
    if (ec) {
      close();
      throw CallFailed(describe_io_error(ec));
    }
    bytes.remove_prefix(sent);
    return bytes.empty();
  }

  /// Room to read into, for `size` buffered bytes in all; the deadline actor watches the read.
  asio::mutable_buffer prepare_read(std::size_t size, const Deadline& deadline) {
    make_room(size);
    begin_step(deadline);
    return asio::buffer(buffer_.data() + end_, buffer_.size() - end_);
  }

  /// After a read of `got` bytes: false on the deadline (nothing consumed: the connection is still
  /// in step); CallFailed on an I/O error, with the connection closed.
  bool finish_read(const boost::system::error_code& ec, std::size_t got) {
    end_step(ec);
    end_ += got;
    if (ec == asio::error::operation_aborted) return false;
    if (ec) {
      close();
      throw CallFailed(describe_io_error(ec));
    }
    return true;
  }

  /// A deadline passed in the middle of a reply: the connection is out of step.
  [[noreturn]] void throw_read_timeout(const Deadline& deadline) {
    close();
    throw CallFailed("timed out after " + describe_duration(deadline.timeout), true);
  }

  /// Reads until `size` bytes are buffered. False on the deadline, with nothing consumed and the
  /// connection still in step (WAIT's cancel needs that); CallFailed on an I/O error, with the
  /// connection closed.
  Task<bool> try_fill(std::size_t size, const Deadline& deadline) {
    while (end_ - begin_ < size) {
      boost::system::error_code ec;
      auto space = prepare_read(size, deadline);
      std::size_t got = co_await socket_.async_read_some(space, asio::redirect_error(asio::use_awaitable, ec));
      if (!finish_read(ec, got)) co_return false;
    }
    co_return true;
  }

  /// try_fill, where a deadline leaves the connection out of step: it is closed and CallFailed
  /// "timed out after <timeout>" is thrown.
  Task<void> fill(std::size_t size, const Deadline& deadline) {
    const bool filled = co_await try_fill(size, deadline);
    if (!filled) throw_read_timeout(deadline);
  }

  /// Waits `duration` (a backoff); cancel() ends it early.
  Task<void> pause(Clock::duration duration) {
    boost::system::error_code ignored;
    pause_timer_.expires_after(duration);
    co_await pause_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }

  /// Before a socket operation: the deadline actor watches `deadline` for it.
  void begin_step(const Deadline& deadline, bool close_on_timeout = false) {
    throw_if_interrupted();
    step_deadline_ = deadline.at;
    close_on_timeout_ = close_on_timeout;
    timed_out_ = false;
    in_flight_ = true;
    watch();
  }

  /// After it: true when the deadline actor ended it; CallFailed "interrupted" after cancel().
  bool end_step(const boost::system::error_code& ec) {
    in_flight_ = false;
    throw_if_interrupted();
    return timed_out_ && ec == asio::error::operation_aborted;
  }

  void throw_if_interrupted() {
    if (!interrupted_) return;
    close();
    throw CallFailed("interrupted");
  }

  /// The deadline actor (Asio's timeouts example): the timer waits for the step's deadline, unless it
  /// already waits for an earlier time (it then looks again when it fires). Steps of one call share
  /// a deadline and later calls have later ones, so it is armed about once per timeout, not per step.
  void watch() {
    if (timer_armed_ && timer_.expiry() <= step_deadline_) return;
    timer_armed_ = true;
    timer_.expires_at(step_deadline_);  // a wait pending for a later time ends with operation_aborted
    timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->on_deadline_timer();
    });
  }

  /// Disarms the deadline actor (no step is in flight): an idle client leaves no work on the loop.
  void stop_watching() {
    if (!timer_armed_) return;
    timer_armed_ = false;
    timer_.cancel();
  }

  void on_deadline_timer() {
    timer_armed_ = false;
    if (!in_flight_) return;  // between steps: the next one arms the timer again
    if (Clock::now() < step_deadline_) {
      watch();
      return;
    }
    timed_out_ = true;
    boost::system::error_code ignored;
    if (close_on_timeout_) {
      socket_.close(ignored);
    } else {
      socket_.cancel(ignored);
    }
    if (resolver_) resolver_->cancel();
  }

  // ------------------------------------------------------------------------------ read buffer

  std::span<const std::uint8_t> buffered() const {
    return {reinterpret_cast<const std::uint8_t*>(buffer_.data()) + begin_, end_ - begin_};
  }

  void consume(std::size_t size) {
    begin_ += size;
    if (begin_ == end_) begin_ = end_ = 0;
  }

  /// Room for `size` unread bytes from begin_, and for at least one more byte after end_.
  void make_room(std::size_t size) {
    if (buffer_.empty()) buffer_.resize(std::max(size, kReadChunk));  // the first read (see the constructor)
    if (buffer_.size() - begin_ < size || end_ == buffer_.size()) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buffer_.size() < size) buffer_.resize(std::max(size, kReadChunk));
  }

  /// Between calls: gives back a large read buffer, then says whether the connection can be used as
  /// it is: open, nothing buffered, and the peer has not closed it, failed, or sent bytes nobody asked
  /// for. False means: connect again.
  bool usable_between_calls() {
    if (begin_ == end_ && buffer_.size() > kKeptBufferBytes) {
      buffer_.resize(kReadChunk);
      buffer_.shrink_to_fit();
    }
    if (socket_.is_open() && begin_ == end_) {
      char byte = 0;
      ssize_t got = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      // EOF, an error, or bytes nobody asked for (out of step): start over.
    }
    return false;
  }

  asio::any_io_executor executor_;
  const Loop loop_;
  tcp::socket socket_;
  std::optional<tcp::resolver> resolver_;  ///< made at the first name looked up on Asio's thread
  asio::steady_timer timer_;               ///< the deadline actor's
  asio::steady_timer pause_timer_;         ///< backoff pauses
  std::vector<char> buffer_;               ///< received bytes in [begin_, end_)
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::minstd_rand rng_;

  bool busy_ = false;         ///< an operation is pending
  bool interrupted_ = false;  ///< cancel() was called
  // The step in flight, as the deadline actor sees it.
  bool in_flight_ = false;
  bool timed_out_ = false;
  bool close_on_timeout_ = false;
  bool timer_armed_ = false;
  Clock::time_point step_deadline_{};
};

AsyncStoreClient::AsyncStoreClient(asio::any_io_executor executor, StoreClientOptions options, Loop loop)
    : session_(std::make_shared<Session>(std::move(executor), std::move(options), loop)) {}

AsyncStoreClient::~AsyncStoreClient() { session_->cancel(); }

Task<void> AsyncStoreClient::connect() { return Session::connect(session_); }

Task<void> AsyncStoreClient::set(std::string key, std::string value) {
  return Session::set(session_, std::move(key), std::move(value));
}

Task<std::string> AsyncStoreClient::get(std::string key, milliseconds timeout) {
  return Session::get(session_, std::move(key), timeout);
}

Task<std::int64_t> AsyncStoreClient::add(std::string key, std::int64_t delta) {
  return Session::add(session_, std::move(key), delta);
}

Task<std::string> AsyncStoreClient::compare_set(std::string key, std::string expected, std::string desired) {
  return Session::compare_set(session_, std::move(key), std::move(expected), std::move(desired));
}

Task<bool> AsyncStoreClient::check(std::vector<std::string> keys) { return Session::check(session_, std::move(keys)); }

Task<void> AsyncStoreClient::wait(std::vector<std::string> keys, milliseconds timeout) {
  return Session::wait(session_, std::move(keys), timeout);
}

Task<std::vector<std::string>> AsyncStoreClient::multi_get(std::vector<std::string> keys, milliseconds timeout) {
  return Session::multi_get(session_, std::move(keys), timeout);
}

Task<std::int64_t> AsyncStoreClient::num_keys() { return Session::num_keys(session_); }

Task<bool> AsyncStoreClient::delete_key(std::string key) { return Session::delete_key(session_, std::move(key)); }

Task<void> AsyncStoreClient::append(std::string key, std::string value) {
  return Session::append(session_, std::move(key), std::move(value));
}

Task<void> AsyncStoreClient::multi_set(std::vector<std::string> keys, std::vector<std::string> values) {
  return Session::multi_set(session_, std::move(keys), std::move(values));
}

Task<void> AsyncStoreClient::queue_push(std::string key, std::string value) {
  return Session::queue_push(session_, std::move(key), std::move(value));
}

Task<std::string> AsyncStoreClient::queue_pop(std::string key, milliseconds timeout) {
  return Session::queue_pop(session_, std::move(key), timeout);
}

Task<std::int64_t> AsyncStoreClient::queue_len(std::string key) { return Session::queue_len(session_, std::move(key)); }

Task<void> AsyncStoreClient::ping() { return Session::ping(session_); }

void AsyncStoreClient::cancel() { session_->cancel(); }

wire::Dialect AsyncStoreClient::dialect() const { return session_->dialect; }

std::string AsyncStoreClient::address() const { return session_->address; }

const StoreClientOptions& AsyncStoreClient::options() const { return session_->options; }

}  // namespace ddprun::rendezvous

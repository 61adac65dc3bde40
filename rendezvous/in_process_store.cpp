#include "rendezvous/in_process_store.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <span>

#include "rendezvous/deadline.hpp"  // describe_duration
#include "rendezvous/store_error.hpp"

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace ddprun::rendezvous {
namespace {

constexpr SessionId kRequests = 0;  ///< the session of every operation but the waits

wire::Request request(wire::Op op, std::vector<std::string> keys, std::vector<std::string> values = {}) {
  wire::Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return r;
}

std::string listed(const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& key : keys) text += (text.empty() ? "" : ", ") + key;
  return text;
}

}  // namespace

/// A wait in progress: its coroutine sleeps on `timer` until a key wakes it (done) or its deadline.
struct InProcessStore::Waiter {
  SteadyTime deadline;
  asio::steady_timer* timer;
  bool done = false;
  bool timed_out = false;
};

InProcessStore::InProcessStore(asio::any_io_executor executor, Time time)
    : executor_(std::move(executor)), time_(time), manual_now_(std::chrono::steady_clock::now()) {}

SteadyTime InProcessStore::now() const {
  return time_ == Time::manual ? manual_now_ : std::chrono::steady_clock::now();
}

ClockFn InProcessStore::clock() const {
  if (time_ == Time::real) return or_steady_clock({});
  return [this] { return manual_now_; };
}

void InProcessStore::advance(milliseconds by) {
  manual_now_ += by;
  for (auto& [session, waiter] : waiters_) {
    if (waiter->done || waiter->timed_out || waiter->deadline > manual_now_) continue;
    waiter->timed_out = true;
    waiter->timer->cancel();
  }
}

std::optional<SteadyTime> InProcessStore::next_deadline() const {
  std::optional<SteadyTime> next;
  for (const auto& [session, waiter] : waiters_) {
    if (waiter->done || waiter->timed_out || waiter->deadline == SteadyTime::max()) continue;
    if (!next || waiter->deadline < *next) next = waiter->deadline;
  }
  return next;
}

bool InProcessStore::advance_to_next_deadline() {
  auto next = next_deadline();
  if (!next) return false;
  advance(std::max(std::chrono::ceil<milliseconds>(*next - manual_now_), milliseconds(0)));
  return true;
}

Task<void> InProcessStore::round_trip() { co_await asio::post(executor_, asio::use_awaitable); }

std::string InProcessStore::execute_raw(SessionId session, const wire::Request& r) {
  KeySpace::Outcome outcome = keys_.execute(session, r);
  if (!outcome.error.empty()) throw StoreError("in-process store: " + outcome.error);
  for (const auto& delivery : outcome.deliveries) {
    auto it = waiters_.find(delivery.session);
    if (it == waiters_.end() || it->second->done || it->second->timed_out) continue;
    it->second->done = true;
    it->second->timer->cancel();
  }
  return std::move(outcome.reply);
}

wire::Reply InProcessStore::execute(const wire::Request& r) {
  const std::string bytes = execute_raw(kRequests, r);
  // The reply as a client reads it off the wire.
  auto decoded = wire::decode_reply(r.op, std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()),
                                    wire::Limits{}, r.keys.size());
  if (decoded.status != wire::DecodeStatus::complete) throw StoreError("in-process store: a bad reply: " + decoded.error);
  return std::move(decoded.reply);
}

Task<void> InProcessStore::set(std::string key, std::string value) {
  co_await round_trip();
  execute(request(wire::Op::set, {std::move(key)}, {std::move(value)}));
}

Task<std::string> InProcessStore::get(std::string key, milliseconds timeout) {
  co_await wait(std::vector<std::string>(1, key), timeout);
  wire::Reply reply = execute(request(wire::Op::get, {std::move(key)}));
  co_return std::move(reply.values.at(0));
}

Task<std::int64_t> InProcessStore::add(std::string key, std::int64_t delta) {
  co_await round_trip();
  wire::Request r = request(wire::Op::add, {std::move(key)});
  r.delta = delta;
  co_return execute(r).number;
}

Task<std::string> InProcessStore::compare_set(std::string key, std::string expected, std::string desired) {
  co_await round_trip();
  wire::Reply reply = execute(request(wire::Op::compare_set, {std::move(key)}, {std::move(expected), std::move(desired)}));
  co_return std::move(reply.values.at(0));
}

Task<bool> InProcessStore::check(std::vector<std::string> keys) {
  co_await round_trip();
  co_return execute(request(wire::Op::check, std::move(keys))).number == wire::kCheckReady;
}

Task<void> InProcessStore::wait(std::vector<std::string> keys, milliseconds timeout) {
  co_await round_trip();
  const SessionId session = next_session_++;
  if (!execute_raw(session, request(wire::Op::wait, keys)).empty()) {  // every key is there
    keys_.forget(session);
    co_return;
  }
  asio::steady_timer timer(executor_);
  Waiter waiter;
  waiter.timer = &timer;
  // A "forever" timeout (milliseconds::max()) must not overflow the time point.
  const auto left = std::chrono::duration_cast<milliseconds>(SteadyTime::max() - now());
  waiter.deadline = timeout >= left ? SteadyTime::max() : now() + timeout;
  timer.expires_at(time_ == Time::real ? waiter.deadline : SteadyTime::max());
  waiters_[session] = &waiter;
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  waiters_.erase(session);
  keys_.forget(session);  // a wait that timed out is abandoned in the KeySpace
  if (!waiter.done) {
    throw StoreTimeout("in-process store: wait for " + listed(keys) + " timed out after " + describe_duration(timeout));
  }
}

Task<std::vector<std::string>> InProcessStore::multi_get(std::vector<std::string> keys, milliseconds timeout) {
  co_await wait(keys, timeout);
  wire::Reply reply = execute(request(wire::Op::multi_get, std::move(keys)));
  co_return std::move(reply.values);
}

}  // namespace ddprun::rendezvous

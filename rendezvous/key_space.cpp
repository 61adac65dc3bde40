#include "rendezvous/key_space.hpp"

#include <cstdint>
#include <utility>

#include "common/integer.hpp"

namespace ddprun::rendezvous {
namespace {

using wire::Op;

constexpr std::size_t kLengthBytes = 8;  ///< the u64 before every bytes field of a reply

/// a + b, or SIZE_MAX when that overflows.
std::size_t saturating_add(std::size_t a, std::size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }

/// The one byte that ends every completed WAIT, shared by all the wake-ups of one SET.
const std::shared_ptr<const std::string>& stop_waiting() {
  static const auto stop = std::make_shared<const std::string>(1, static_cast<char>(wire::kStopWaiting));
  return stop;
}

}  // namespace

bool KeySpace::present(const std::string& key) const {
  if (data_.contains(key)) return true;
  auto queue = queues_.find(key);
  return queue != queues_.end() && !queue->second.empty();
}

bool KeySpace::count_for(const Registration& registration, Outcome& outcome) {
  auto wait = waits_.find(registration.session);
  if (wait == waits_.end() || !wait->second.active || wait->second.generation != registration.generation) {
    stale_registrations_ -= 1;
    return false;
  }
  live_registrations_ -= 1;
  if (--wait->second.missing > 0) return false;
  wait->second.active = false;
  outcome.deliveries.push_back({registration.session, stop_waiting()});
  return true;
}

void KeySpace::key_appeared(const std::string& key, Outcome& outcome) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<Registration> registrations = std::move(it->second);
  waiters_.erase(it);
  for (const auto& registration : registrations) count_for(registration, outcome);
}

void KeySpace::queue_item_arrived(const std::string& key, Outcome& outcome) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  auto& registrations = it->second;
  std::size_t used = 0;
  while (used < registrations.size()) {
    if (count_for(registrations[used++], outcome)) break;  // woken: the item is that waiter's to pop
  }
  registrations.erase(registrations.begin(), registrations.begin() + static_cast<std::ptrdiff_t>(used));
  if (registrations.empty()) waiters_.erase(it);
}

void KeySpace::key_changed(const std::string& key, const std::string* old_value, const std::string* new_value,
                           Outcome& outcome) {
  if (!watchers_.contains(key)) return;
  std::uint8_t type = new_value == nullptr   ? wire::kWatchKeyDeleted
                      : old_value == nullptr ? wire::kWatchKeyCreated
                                             : wire::kWatchKeyUpdated;
  push_to_watchers(key,
                   wire::encode_watch_push(type, key, old_value != nullptr ? *old_value : std::string_view(),
                                           new_value != nullptr ? *new_value : std::string_view()),
                   outcome);
}

void KeySpace::push_to_watchers(const std::string& key, std::string push, Outcome& outcome) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  auto shared = std::make_shared<const std::string>(std::move(push));
  for (SessionId watcher : it->second) outcome.deliveries.push_back({watcher, shared});
}

void KeySpace::handle_watch(SessionId session, const std::string& key, Outcome& outcome) {
  auto& watched = watched_by_[session];
  auto& sessions = watchers_[key];
  if (!sessions.contains(session)) {  // watching a key again costs nothing more
    if (watched.size() >= kMaxWatchedKeys) {
      if (sessions.empty()) watchers_.erase(key);
      outcome.error = "WATCH_KEY of a key past the " + std::to_string(kMaxWatchedKeys) + " one connection may watch";
      return;
    }
    sessions.insert(session);
    watched.push_back(key);
  }
  wire::put_u8(outcome.reply, wire::kWatchRegistered);
}

void KeySpace::handle_append(const std::string& key, const std::string& tail, Outcome& outcome) {
  auto it = data_.find(key);
  const std::size_t before = it == data_.end() ? 0 : it->second.size();
  if (tail.size() > max_value_bytes_ || before > max_value_bytes_ - tail.size()) {
    outcome.error = "APPEND of " + std::to_string(tail.size()) + " bytes to a value of " + std::to_string(before) +
                    " would pass max_value_bytes (" + std::to_string(max_value_bytes_) + ")";
    return;
  }
  const bool created = it == data_.end();
  if (created) it = data_.emplace(key, std::string()).first;
  it->second.append(tail);
  // PyTorch 2.0's push for APPEND carries only the appended bytes.
  if (watchers_.contains(key)) {
    push_to_watchers(key, wire::encode_watch_push(wire::kWatchKeyAppended, key, {}, tail), outcome);
  }
  if (created) key_appeared(key, outcome);
}

void KeySpace::handle_wait(SessionId session, const wire::Request& request, Outcome& outcome) {
  PendingWait& wait = waits_[session];
  abandon_wait(wait);  // a client that pipelines a second WAIT gives up the first
  wait.generation += 1;
  wait.missing = 0;
  std::unordered_set<std::string> counted;
  for (const auto& key : request.keys) {
    if (present(key) || !counted.insert(key).second) continue;
    waiters_[key].push_back({session, wait.generation});
    wait.missing += 1;
    live_registrations_ += 1;
  }
  wait.active = wait.missing > 0;
  if (!wait.active) wire::put_u8(outcome.reply, wire::kStopWaiting);
}

void KeySpace::abandon_wait(PendingWait& wait) {
  if (!wait.active) return;
  wait.active = false;
  live_registrations_ -= wait.missing;
  stale_registrations_ += wait.missing;
  if (stale_registrations_ <= 4096 || stale_registrations_ <= live_registrations_) return;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    std::erase_if(it->second, [this](const Registration& r) {
      auto w = waits_.find(r.session);
      return w == waits_.end() || !w->second.active || w->second.generation != r.generation;
    });
    it = it->second.empty() ? waiters_.erase(it) : std::next(it);
  }
  stale_registrations_ = 0;
}

void KeySpace::handle_cancel_wait(SessionId session, Outcome& outcome) {
  // The wait's registrations stay in waiters_, stale, until their key appears or a sweep.
  auto wait = waits_.find(session);
  if (wait != waits_.end()) abandon_wait(wait->second);
  wire::put_u8(outcome.reply, wire::kWaitCanceled);
}

KeySpace::Outcome KeySpace::execute(SessionId session, const wire::Request& request) {
  Outcome outcome;
  const std::string* key = request.keys.empty() ? nullptr : &request.keys.front();
  switch (request.op) {
    case Op::validate:
    case Op::auth_challenge:
    case Op::auth_response:
      outcome.error = "request handled by the connection reached the key space";
      break;
    case Op::ping:
      wire::put_u32(outcome.reply, request.number);
      break;
    case Op::set: {
      auto [it, created] = data_.try_emplace(*key);
      std::string old = std::exchange(it->second, request.values.at(0));  // moved out, not copied
      key_changed(*key, created ? nullptr : &old, &it->second, outcome);
      key_appeared(*key, outcome);
      break;
    }
    case Op::compare_set: {
      const std::string& expected = request.values.at(0);
      const std::string& desired = request.values.at(1);
      auto it = data_.find(*key);
      if (it == data_.end()) {
        if (!expected.empty()) {
          wire::put_bytes(outcome.reply, expected);  // missing and a value expected: nothing set
          break;
        }
        it = data_.emplace(*key, desired).first;
        key_changed(*key, nullptr, &it->second, outcome);
        key_appeared(*key, outcome);
      } else if (it->second == expected) {
        std::string old = std::exchange(it->second, desired);
        key_changed(*key, &old, &it->second, outcome);
      }
      wire::put_bytes(outcome.reply, it->second);
      break;
    }
    case Op::get: {
      auto it = data_.find(*key);
      if (it == data_.end()) {
        outcome.error = "GET of missing key " + *key + " (clients WAIT first)";
        break;
      }
      wire::put_bytes(outcome.reply, it->second);
      break;
    }
    case Op::add: {
      auto [it, created] = data_.try_emplace(*key, "0");
      auto counter = common::parse_integer<std::int64_t>(it->second);  // ASCII decimal, as PyTorch stores it
      if (!counter) {
        if (created) data_.erase(it);
        outcome.error = "ADD to key " + *key + " whose value is not a number";
        break;
      }
      std::string old = it->second;
      // Wrap like the two's-complement arithmetic PyTorch's server does, without the UB.
      auto value =
          static_cast<std::int64_t>(static_cast<std::uint64_t>(*counter) + static_cast<std::uint64_t>(request.delta));
      it->second = std::to_string(value);
      wire::put_i64(outcome.reply, value);
      key_changed(*key, created ? nullptr : &old, &it->second, outcome);
      if (created) key_appeared(*key, outcome);
      break;
    }
    case Op::check: {
      bool ready = true;
      for (const auto& k : request.keys) ready = ready && present(k);
      wire::put_u8(outcome.reply, ready ? wire::kCheckReady : wire::kCheckNotReady);
      break;
    }
    case Op::wait:
      handle_wait(session, request, outcome);
      break;
    case Op::cancel_wait:
      handle_cancel_wait(session, outcome);
      break;
    case Op::num_keys:
      wire::put_i64(outcome.reply, static_cast<std::int64_t>(data_.size()));
      break;
    case Op::delete_key: {
      auto it = data_.find(*key);
      std::int64_t deleted = 0;
      if (it != data_.end()) {
        std::string old = std::move(it->second);
        data_.erase(it);
        deleted = 1;
        key_changed(*key, &old, nullptr, outcome);
      }
      wire::put_i64(outcome.reply, deleted);
      break;
    }
    case Op::append:
      handle_append(*key, request.values.at(0), outcome);
      break;
    case Op::multi_get: {
      std::string reply;
      reply.reserve(reply_bytes(request));  // admitted by the connection's budget before this
      for (const auto& k : request.keys) {
        auto it = data_.find(k);
        if (it == data_.end()) {
          outcome.error = "MULTI_GET of missing key " + k + " (clients WAIT first)";
          return outcome;
        }
        wire::put_bytes(reply, it->second);
      }
      outcome.reply = std::move(reply);
      break;
    }
    case Op::multi_set:
      for (std::size_t i = 0; i < request.keys.size(); ++i) {
        auto [it, created] = data_.try_emplace(request.keys[i]);
        std::string old = std::exchange(it->second, request.values.at(i));
        key_changed(request.keys[i], created ? nullptr : &old, &it->second, outcome);
        key_appeared(request.keys[i], outcome);
      }
      break;
    case Op::queue_push: {
      queues_[*key].push_back(request.values.at(0));
      queue_item_arrived(*key, outcome);
      break;
    }
    case Op::queue_pop: {
      auto it = queues_.find(*key);
      std::int64_t length = it == queues_.end() ? 0 : static_cast<std::int64_t>(it->second.size());
      wire::put_i64(outcome.reply, length);
      if (length > 0) {
        wire::put_bytes(outcome.reply, it->second.front());
        it->second.pop_front();
        if (it->second.empty()) queues_.erase(it);
      }
      break;
    }
    case Op::queue_len: {
      auto it = queues_.find(*key);
      wire::put_i64(outcome.reply, it == queues_.end() ? 0 : static_cast<std::int64_t>(it->second.size()));
      break;
    }
    case Op::watch_key:
      handle_watch(session, *key, outcome);
      break;
  }
  return outcome;
}

std::size_t KeySpace::reply_bytes(const wire::Request& request) const {
  const std::string* key = request.keys.empty() ? nullptr : &request.keys.front();
  auto bytes_field = [](const std::string& value) { return saturating_add(kLengthBytes, value.size()); };
  switch (request.op) {
    case Op::validate:
    case Op::auth_challenge:
    case Op::auth_response:
    case Op::set:
    case Op::append:
    case Op::multi_set:
    case Op::queue_push:
      return 0;
    case Op::ping:
      return 4;
    case Op::add:
    case Op::num_keys:
    case Op::delete_key:
    case Op::queue_len:
      return 8;
    case Op::check:
    case Op::wait:
    case Op::cancel_wait:
    case Op::watch_key:
      return 1;
    case Op::get: {
      auto it = data_.find(*key);
      return it == data_.end() ? 0 : bytes_field(it->second);
    }
    case Op::compare_set: {
      const std::string& expected = request.values.at(0);
      const std::string& desired = request.values.at(1);
      auto it = data_.find(*key);
      if (it == data_.end()) return bytes_field(expected.empty() ? desired : expected);
      return bytes_field(it->second == expected ? desired : it->second);
    }
    case Op::multi_get: {
      std::size_t total = 0;
      for (const auto& k : request.keys) {
        auto it = data_.find(k);
        if (it != data_.end()) total = saturating_add(total, bytes_field(it->second));
      }
      return total;
    }
    case Op::queue_pop: {
      auto it = queues_.find(*key);
      return it == queues_.end() || it->second.empty() ? 8 : saturating_add(8, bytes_field(it->second.front()));
    }
  }
  return 0;
}

void KeySpace::forget(SessionId session) {
  if (auto wait = waits_.find(session); wait != waits_.end()) {
    abandon_wait(wait->second);
    waits_.erase(wait);
  }
  auto watched = watched_by_.find(session);
  if (watched == watched_by_.end()) return;
  for (const auto& key : watched->second) {
    auto it = watchers_.find(key);
    if (it == watchers_.end()) continue;
    it->second.erase(session);
    if (it->second.empty()) watchers_.erase(it);
  }
  watched_by_.erase(watched);
}

std::size_t KeySpace::erase_all_but(const std::string& kept) {
  auto other = [&kept](const auto& entry) { return !entry.first.starts_with(kept); };
  return std::erase_if(data_, other) + std::erase_if(queues_, other);
}

void KeySpace::clear() {
  data_.clear();
  queues_.clear();
  waiters_.clear();
  waits_.clear();
  watchers_.clear();
  watched_by_.clear();
  stale_registrations_ = 0;
  live_registrations_ = 0;
}

}  // namespace ddprun::rendezvous

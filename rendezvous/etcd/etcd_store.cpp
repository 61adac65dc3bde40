#include "rendezvous/etcd/etcd_store.hpp"

#include <charconv>

#include "rendezvous/deadline.hpp"  // describe_duration
#include "rendezvous/etcd/etcd_json.hpp"

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace ddprun::rendezvous {
namespace {

milliseconds left_until(Clock::time_point deadline) {
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

std::string prefix_end(std::string prefix) {
  // The smallest key greater than every key starting with `prefix` (etcd's range_end convention).
  while (!prefix.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(prefix.back());
    if (last < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

/// A counter's value: its version when add() counts it by version, else its decimal text.
std::int64_t counter_value(const etcd::KeyValue& kv, const std::string& key) {
  if (kv.value == EtcdStore::kCountedByVersion) return kv.version;
  std::int64_t value = 0;
  const std::string& text = kv.value;
  if (text.empty()) return 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    throw StoreError("ADD on " + key + ": its value is not a counter: " + text.substr(0, 40));
  }
  return value;
}

}  // namespace

EtcdStore::EtcdStore(boost::asio::any_io_executor executor, std::shared_ptr<EtcdSession> session,
                     milliseconds connect_timeout, milliseconds timeout)
    : session_(std::move(session)),
      requests_(executor, session_->cluster()),
      watches_(executor, session_->cluster()),
      connect_timeout_(connect_timeout),
      timeout_(timeout) {}

Task<void> EtcdStore::connect() {
  co_await requests_.call("/v3/kv/range", etcd::range_body(session_->full_key("ddprun/")), connect_timeout_);
}

void EtcdStore::cancel() {
  requests_.cancel();
  watches_.cancel();
}

std::string EtcdStore::address() const { return "etcd-v3 at " + session_->options().describe_endpoints(); }

// A write whose lease expired while this agent stood still (frozen past its TTL, woken before its
// renewal saw the lease gone) is refused whole ("requested lease not found": nothing applied, so a
// retry cannot count twice); it is made again once, with a new lease. The keys of the old lease are
// gone, which is what the other nodes acted on (they dropped this agent; it rejoins).
namespace {
bool lease_gone(const StoreError& error) {
  return std::string_view(error.what()).find("requested lease not found") != std::string_view::npos;
}
}  // namespace

Task<void> EtcdStore::set(std::string key, std::string value) {
  for (int attempt = 0;; ++attempt) {
    const std::int64_t lease = co_await session_->lease_for(key, timeout_);
    try {
      co_await set_leased(key, value, lease);
      co_return;
    } catch (const StoreError& error) {
      if (attempt > 0 || !lease_gone(error)) throw;
      session_->forget_lease(lease);
    }
  }
}

Task<std::int64_t> EtcdStore::add(std::string key, std::int64_t delta) {
  for (int attempt = 0;; ++attempt) {
    const std::int64_t lease = co_await session_->lease_for(key, timeout_);
    try {
      co_return co_await add_leased(key, delta, lease);
    } catch (const StoreError& error) {
      if (attempt > 0 || !lease_gone(error)) throw;
      session_->forget_lease(lease);
    }
  }
}

Task<std::string> EtcdStore::compare_set(std::string key, std::string expected, std::string desired) {
  for (int attempt = 0;; ++attempt) {
    const std::int64_t lease = co_await session_->lease_for(key, timeout_);
    try {
      co_return co_await compare_set_leased(key, expected, desired, lease);
    } catch (const StoreError& error) {
      if (attempt > 0 || !lease_gone(error)) throw;
      session_->forget_lease(lease);
    }
  }
}

Task<void> EtcdStore::set_leased(std::string key, std::string value, std::int64_t lease) {
  co_await requests_.call("/v3/kv/put", etcd::put_body(session_->full_key(key), value, lease), timeout_);
}

Task<std::string> EtcdStore::get(std::string key, milliseconds timeout) {
  std::vector<std::string> keys(1, std::move(key));
  std::vector<std::string> values = co_await multi_get(std::move(keys), timeout);
  co_return std::move(values.front());
}

Task<std::int64_t> EtcdStore::add_leased(std::string key, std::int64_t delta, std::int64_t lease) {
  const std::string full = session_->full_key(key);
  const etcd::Operation read{etcd::Operation::Kind::range, full, {}, 0};
  const etcd::Operation count{etcd::Operation::Kind::put, full, std::string(kCountedByVersion), lease};
  if (delta == 0) {
    std::vector<std::string> keys(1, key);
    auto [revision, values] = co_await look(std::move(keys), timeout_);
    if (!values.front()) co_return 0;
    etcd::KeyValue kv;  // look() gives a count kept by version as its decimal text
    kv.value = std::move(*values.front());
    co_return counter_value(kv, key);
  }
  std::optional<etcd::KeyValue> kv;
  if (delta == 1) {
    // The fast way, without retries however many nodes add at once: the key's version counts the
    // puts, so "put the marker, then read the version" in one transaction is an atomic increment.
    for (int attempt = 0; attempt < 2; ++attempt) {
      etcd::Compare holds;
      holds.key = full;
      if (attempt == 0) {
        holds.target = etcd::Compare::Target::value;
        holds.value = std::string(kCountedByVersion);
      } else {
        holds.target = etcd::Compare::Target::create;  // a new key starts counting at 1
        holds.revision = 0;
      }
      std::string txn = etcd::txn_body(std::vector<etcd::Compare>(1, holds), std::vector<etcd::Operation>{count, read},
                                       std::vector<etcd::Operation>(1, read));
      const etcd::TxnReply reply = etcd::parse_txn(co_await requests_.call("/v3/kv/txn", std::move(txn), timeout_));
      if (reply.succeeded && reply.ranges.size() == 2 && reply.ranges[1]) co_return reply.ranges[1]->version;
      kv = reply.ranges.empty() ? std::nullopt : reply.ranges.front();
      if (kv) break;  // an explicit counter (or another value): the compare-and-put below
    }
  }
  // Any other delta, or a counter kept as a value: read, then put the sum if nobody changed it.
  for (;;) {
    if (!kv) {
      std::string txn = etcd::txn_body({}, std::vector<etcd::Operation>(1, read), {});
      const etcd::TxnReply reply = etcd::parse_txn(co_await requests_.call("/v3/kv/txn", std::move(txn), timeout_));
      kv = reply.ranges.empty() ? std::nullopt : reply.ranges.front();
    }
    etcd::Compare unchanged;
    unchanged.key = full;
    unchanged.target = kv ? etcd::Compare::Target::mod : etcd::Compare::Target::create;
    unchanged.revision = kv ? kv->mod_revision : 0;
    const std::int64_t next = (kv ? counter_value(*kv, key) : 0) + delta;
    etcd::Operation put{etcd::Operation::Kind::put, full, std::to_string(next), lease};
    std::string txn = etcd::txn_body(std::vector<etcd::Compare>(1, unchanged), std::vector<etcd::Operation>(1, put),
                                     std::vector<etcd::Operation>(1, read));
    const etcd::TxnReply reply = etcd::parse_txn(co_await requests_.call("/v3/kv/txn", std::move(txn), timeout_));
    if (reply.succeeded) co_return next;
    kv = reply.ranges.empty() ? std::nullopt : reply.ranges.front();
    if (!kv) {
      // Deleted meanwhile: start from 0 with a create compare.
      kv.reset();
      etcd::Compare created;
      created.key = full;
      created.target = etcd::Compare::Target::create;
      std::string again = etcd::txn_body(std::vector<etcd::Compare>(1, created),
                                         std::vector<etcd::Operation>{etcd::Operation{etcd::Operation::Kind::put, full,
                                                                                      std::to_string(delta), lease}},
                                         std::vector<etcd::Operation>(1, read));
      const etcd::TxnReply made = etcd::parse_txn(co_await requests_.call("/v3/kv/txn", std::move(again), timeout_));
      if (made.succeeded) co_return delta;
      kv = made.ranges.empty() ? std::nullopt : made.ranges.front();
    }
  }
}

Task<std::string> EtcdStore::compare_set_leased(std::string key, std::string expected, std::string desired,
                                                std::int64_t lease) {
  const std::string full = session_->full_key(key);
  etcd::Compare holds;
  holds.key = full;
  if (expected.empty()) {
    holds.target = etcd::Compare::Target::create;
    holds.revision = 0;
  } else {
    holds.target = etcd::Compare::Target::value;
    holds.value = expected;
  }
  etcd::Operation put{etcd::Operation::Kind::put, full, desired, lease};
  etcd::Operation read{etcd::Operation::Kind::range, full, {}, 0};
  std::string txn = etcd::txn_body(std::vector<etcd::Compare>(1, holds), std::vector<etcd::Operation>(1, put),
                                   std::vector<etcd::Operation>(1, read));
  const etcd::TxnReply reply = etcd::parse_txn(co_await requests_.call("/v3/kv/txn", std::move(txn), timeout_));
  if (reply.succeeded) co_return desired;
  const auto& kv = reply.ranges.empty() ? std::nullopt : reply.ranges.front();
  // Missing with a non-empty expectation: TCPStore answers with the expectation.
  co_return kv ? kv->value : expected;
}

Task<std::pair<std::int64_t, std::vector<std::optional<std::string>>>> EtcdStore::look(std::vector<std::string> keys,
                                                                                       milliseconds timeout) {
  std::vector<etcd::Operation> reads;
  for (const auto& key : keys) reads.push_back(etcd::Operation{etcd::Operation::Kind::range, session_->full_key(key), {}, 0});
  std::string txn = etcd::txn_body({}, reads, {});
  const etcd::TxnReply reply = etcd::parse_txn(co_await requests_.call("/v3/kv/txn", std::move(txn), timeout));
  std::vector<std::optional<std::string>> values(keys.size());
  for (std::size_t i = 0; i < keys.size() && i < reply.ranges.size(); ++i) {
    if (!reply.ranges[i]) continue;
    const etcd::KeyValue& kv = *reply.ranges[i];
    values[i] = kv.value == kCountedByVersion ? std::to_string(kv.version) : kv.value;
  }
  co_return std::pair{reply.revision, std::move(values)};
}

Task<bool> EtcdStore::check(std::vector<std::string> keys) {
  auto [revision, values] = co_await look(std::move(keys), timeout_);
  for (const auto& value : values) {
    if (!value) co_return false;
  }
  co_return true;
}

Task<std::vector<std::optional<std::string>>> EtcdStore::get_if_present(std::vector<std::string> keys) {
  auto [revision, values] = co_await look(std::move(keys), timeout_);
  co_return std::move(values);
}

Task<void> EtcdStore::watch_for(std::string key, std::int64_t revision, Clock::time_point deadline, milliseconds timeout) {
  const std::string full = session_->full_key(key);
  std::int64_t from = revision + 1;
  bool seen = false;
  bool look_again = false;
  auto body = [&] { return etcd::watch_body(full, from); };
  auto on_line = [&](const std::string& line) {
    const etcd::WatchMessage message = etcd::parse_watch_message(line);
    if (message.error) throw StoreError("etcd's watch of " + key + " failed: " + message.error->message);
    if (message.canceled || message.compact_revision > 0) {
      // The start revision was compacted away (or etcd ended the watch): look again from now.
      look_again = true;
      return true;
    }
    for (const auto& event : message.events) {
      from = std::max(from, event.kv.mod_revision + 1);  // a failover resumes after what was seen
      if (!event.deleted && event.kv.key == full) seen = true;
    }
    return seen;
  };
  for (;;) {
    // A member that is cut off keeps a watch open and silent: each stream lasts one slice, and the
    // next is opened again (on the next member if this one does not answer), from where it stood.
    const Clock::time_point slice_end = std::min(deadline, Clock::now() + kWatchSlice);
    bool sliced = false;
    try {
      co_await watches_.stream("/v3/watch", body, on_line, left_until(slice_end));
    } catch (const StoreTimeout&) {
      if (slice_end >= deadline || Clock::now() >= deadline) {
        throw StoreTimeout("etcd-v3 wait timed out after " + describe_duration(timeout) +
                           " waiting for the key(s) to be set");
      }
      sliced = true;
    }
    if (!sliced) break;
  }
  (void)look_again;  // either way the caller looks at the keys again
}

Task<void> EtcdStore::wait(std::vector<std::string> keys, milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    auto [revision, values] = co_await look(keys, timeout_);
    std::size_t missing = 0;
    while (missing < values.size() && values[missing]) ++missing;
    if (missing == values.size()) co_return;
    if (Clock::now() >= deadline) {
      throw StoreTimeout("etcd-v3 wait timed out after " + describe_duration(timeout) + " waiting for the key(s) to be set");
    }
    co_await watch_for(keys[missing], revision, deadline, timeout);
  }
}

Task<std::vector<std::string>> EtcdStore::multi_get(std::vector<std::string> keys, milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    auto [revision, values] = co_await look(keys, timeout_);
    std::size_t missing = 0;
    while (missing < values.size() && values[missing]) ++missing;
    if (missing == values.size()) {
      std::vector<std::string> out;
      for (auto& value : values) out.push_back(std::move(*value));
      co_return out;
    }
    if (Clock::now() >= deadline) {
      throw StoreTimeout("etcd-v3 wait timed out after " + describe_duration(timeout) + " waiting for the key(s) to be set");
    }
    co_await watch_for(keys[missing], revision, deadline, timeout);
  }
}

Task<void> EtcdStore::delete_prefix(std::string prefix) {
  const std::string full = session_->full_key(prefix);
  const std::string body = std::string("{\"key\":\"") + etcd::base64_encode(full) + "\",\"range_end\":\"" +
                           etcd::base64_encode(prefix_end(full)) + "\"}";
  co_await requests_.call("/v3/kv/deleterange", body, timeout_);
}

StoreFactory etcd_store_factory(std::shared_ptr<EtcdSession> session) {
  // The renewals keep the session alive by themselves: the last copy of the factory stops them.
  struct StopsTheSession {
    std::shared_ptr<EtcdSession> session;
    ~StopsTheSession() {
      if (session) session->stop();
    }
  };
  auto owner = std::shared_ptr<StopsTheSession>(new StopsTheSession{session});
  StoreFactory factory;
  factory.address = "etcd-v3 at " + session->options().describe_endpoints();
  factory.hosted_by_an_agent = false;
  factory.key_space = "key prefix '" + session->options().key_prefix + "' of " + factory.address;
  factory.open = [owner](boost::asio::any_io_executor executor, milliseconds connect_timeout,
                         milliseconds timeout) -> std::unique_ptr<Store> {
    return std::make_unique<EtcdStore>(executor, owner->session, connect_timeout, timeout);
  };
  return factory;
}

}  // namespace ddprun::rendezvous

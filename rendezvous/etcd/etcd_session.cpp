#include "rendezvous/etcd/etcd_session.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>

#include "rendezvous/etcd/etcd_json.hpp"

namespace asio = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace ddprun::rendezvous {

LeaseScope lease_scope(std::string_view key) {
  constexpr std::string_view kRounds = "ddprun/rdzv/";
  if (!key.starts_with(kRounds)) return {};
  key.remove_prefix(kRounds.size());
  const auto slash = key.find('/');
  if (slash == std::string_view::npos || slash == 0) return {};
  LeaseScope scope;
  scope.run_id = std::string(key.substr(0, slash));
  scope.kind = key.substr(slash + 1).starts_with("heartbeat/") ? LeaseScope::Kind::node : LeaseScope::Kind::job;
  if (scope.kind == LeaseScope::Kind::node) scope.run_id.clear();
  return scope;
}

std::shared_ptr<EtcdSession> EtcdSession::create(asio::any_io_executor executor, EtcdOptions options) {
  return std::shared_ptr<EtcdSession>(new EtcdSession(executor, std::move(options)));
}

EtcdSession::EtcdSession(asio::any_io_executor executor, EtcdOptions options)
    : executor_(executor),
      cluster_(std::make_shared<EtcdCluster>(std::move(options))),
      grants_(executor, cluster_),
      renewals_(executor, cluster_),
      turn_(executor, Clock::time_point::max()),
      renew_timer_(executor) {}

EtcdSession::~EtcdSession() { stop(); }

void EtcdSession::stop() {
  stopped_ = true;
  grants_.cancel();
  renewals_.cancel();
  turn_.cancel();
  renew_timer_.cancel();
}

Task<std::int64_t> EtcdSession::lease_for(std::string key, milliseconds timeout) {
  const LeaseScope scope = lease_scope(key);
  if (scope.kind == LeaseScope::Kind::none) co_return 0;
  auto self = shared_from_this();  // the coroutine keeps the session
  for (;;) {
    if (stopped_) throw StoreError("etcd at " + options().describe_endpoints() + ": interrupted");
    if (scope.kind == LeaseScope::Kind::node && node_lease_ != 0) co_return node_lease_;
    if (scope.kind == LeaseScope::Kind::job) {
      auto it = job_leases_.find(scope.run_id);
      if (it != job_leases_.end()) co_return it->second;
    }
    if (!busy_) break;
    boost::system::error_code ignored;  // another caller is granting: look again when it is done
    co_await turn_.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
  busy_ = true;
  std::int64_t id = 0;
  try {
    id = scope.kind == LeaseScope::Kind::node ? co_await grant_node_lease(timeout)
                                              : co_await job_lease(scope.run_id, timeout);
  } catch (...) {
    busy_ = false;
    turn_.expires_at(Clock::time_point::max());  // wakes the others, who try themselves
    throw;
  }
  busy_ = false;
  turn_.expires_at(Clock::time_point::max());
  start_renewals();
  co_return id;
}

Task<std::int64_t> EtcdSession::grant_node_lease(milliseconds timeout) {
  const std::string reply = co_await grants_.call("/v3/lease/grant", etcd::lease_grant_body(options().lease_ttl.count()), timeout);
  node_lease_ = etcd::parse_lease_grant(reply).id;
  co_return node_lease_;
}

Task<std::int64_t> EtcdSession::job_lease(std::string run_id, milliseconds timeout) {
  const std::string key = full_key("ddprun/rdzv/" + run_id + "/lease");
  const std::int64_t ttl = options().lease_ttl.count() * kJobLeaseTtlFactor;
  for (;;) {
    if (stopped_) throw StoreError("etcd at " + options().describe_endpoints() + ": interrupted");
    // Another agent of the job may hold one: renew it, and use it while it lives.
    etcd::RangeReply found = etcd::parse_range(co_await grants_.call("/v3/kv/range", etcd::range_body(key), timeout));
    std::int64_t mod_revision = 0;
    if (found.kv) {
      std::int64_t id = 0;
      const std::string& text = found.kv->value;
      std::from_chars(text.data(), text.data() + text.size(), id);
      if (id != 0) {
        const etcd::LeaseReply renewed = etcd::parse_keepalive(
            co_await grants_.call("/v3/lease/keepalive", etcd::lease_id_body(id), timeout));
        if (renewed.ttl > 0) {
          job_leases_[run_id] = id;
          co_return id;
        }
      }
      mod_revision = found.kv->mod_revision;  // a lease that is gone: replace it
    }
    const etcd::LeaseReply granted =
        etcd::parse_lease_grant(co_await grants_.call("/v3/lease/grant", etcd::lease_grant_body(ttl), timeout));
    etcd::Compare unchanged;
    unchanged.key = key;
    unchanged.target = mod_revision == 0 ? etcd::Compare::Target::create : etcd::Compare::Target::mod;
    unchanged.revision = mod_revision;
    etcd::Operation put{etcd::Operation::Kind::put, key, std::to_string(granted.id), granted.id};
    std::string txn = etcd::txn_body(std::vector<etcd::Compare>(1, unchanged), std::vector<etcd::Operation>(1, put), {});
    const etcd::TxnReply stored = etcd::parse_txn(co_await grants_.call("/v3/kv/txn", std::move(txn), timeout));
    if (stored.succeeded) {
      job_leases_[run_id] = granted.id;
      co_return granted.id;
    }
    // Another agent stored its lease first: use that one (this one expires unused).
  }
}

void EtcdSession::forget_lease(std::int64_t id) {
  if (id == 0) return;
  if (node_lease_ == id) node_lease_ = 0;
  std::erase_if(job_leases_, [id](const auto& entry) { return entry.second == id; });
}

void EtcdSession::start_renewals() {
  if (renewing_ || stopped_) return;
  renewing_ = true;
  asio::co_spawn(executor_, renew(shared_from_this()), asio::detached);
}

Task<void> EtcdSession::renew(std::shared_ptr<EtcdSession> self) {
  EtcdSession& s = *self;
  const milliseconds every = std::chrono::duration_cast<milliseconds>(s.options().lease_ttl) / 3;
  while (!s.stopped_) {
    s.renew_timer_.expires_after(every);
    boost::system::error_code ec;
    co_await s.renew_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (s.stopped_) co_return;
    std::vector<std::pair<std::string, std::int64_t>> leases(s.job_leases_.begin(), s.job_leases_.end());
    leases.emplace_back(std::string(), s.node_lease_);
    for (const auto& [run_id, id] : leases) {
      if (id == 0) continue;
      try {
        const etcd::LeaseReply renewed =
            etcd::parse_keepalive(co_await s.renewals_.call("/v3/lease/keepalive", etcd::lease_id_body(id), every));
        if (s.stopped_) co_return;
        if (renewed.ttl > 0) continue;
        // Gone (this agent stood still longer than the TTL): its keys are gone too; the next write
        // that needs it grants a new one.
        if (run_id.empty()) {
          if (s.node_lease_ == id) s.node_lease_ = 0;
        } else if (auto it = s.job_leases_.find(run_id); it != s.job_leases_.end() && it->second == id) {
          s.job_leases_.erase(it);
        }
      } catch (const StoreError&) {
        if (s.stopped_) co_return;
        // A missed renewal; the lease outlives two of them, and the next one tries the next member.
      }
    }
  }
}

}  // namespace ddprun::rendezvous

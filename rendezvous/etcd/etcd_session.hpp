#pragma once
/// EtcdSession: one agent's standing with an etcd cluster, shared by all its EtcdStore
/// connections: the cluster (members, TLS, token) and the leases that make keys vanish on their own.
///
/// Two kinds of lease (which key gets which: lease_scope()):
///  - this agent's own lease (lease_ttl): its heartbeat key lives with it, so when the agent dies or
///    freezes its heartbeat vanishes within lease_ttl and the other nodes drop it at their next look;
///  - the job's lease (kJobLeaseTtlFactor x lease_ttl, one per run id, shared by every agent of the
///    job, its id in "<run>/lease"): every other key of the job lives with it, so the job's keys
///    vanish once no agent of it is left, and the run id (under this key prefix) can be used again.
/// A timer renews both every lease_ttl/3 on the loop (a connection of its own). A lease that has
/// gone meanwhile (this agent was frozen longer than its TTL) is granted anew: the keys it carried
/// are gone, which is what the other nodes acted on.
///
/// Use from the loop's thread only. stop() (or the last owner's release) ends the renewals; the
/// leases then expire by themselves.
#include "rendezvous/store.hpp"  // first: <utility> before Asio (Boost 1.74)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "rendezvous/etcd/etcd_client.hpp"
#include "rendezvous/etcd/etcd_options.hpp"

namespace ddprun::rendezvous {

/// Which lease a key of the store lives with. Pure.
struct LeaseScope {
  enum class Kind { none, node, job };
  Kind kind = Kind::none;
  std::string run_id;  ///< job
  friend bool operator==(const LeaseScope&, const LeaseScope&) = default;
};
/// "ddprun/rdzv/<run>/heartbeat/<node>" -> node; any other "ddprun/rdzv/<run>/..." -> job <run>;
/// anything else -> none (keys of the store's own, never written by an agent on etcd).
LeaseScope lease_scope(std::string_view key);

class EtcdSession : public std::enable_shared_from_this<EtcdSession> {
 public:
  static constexpr int kJobLeaseTtlFactor = 3;

  static std::shared_ptr<EtcdSession> create(boost::asio::any_io_executor executor, EtcdOptions options);
  ~EtcdSession();

  const std::shared_ptr<EtcdCluster>& cluster() const { return cluster_; }
  const EtcdOptions& options() const { return cluster_->options(); }
  /// The store key `key` as etcd holds it: the key prefix + key.
  std::string full_key(std::string_view key) const { return options().key_prefix + std::string(key); }

  /// The lease `key` is written with (0: none); grants the lease first when needed, within `timeout`.
  Task<std::int64_t> lease_for(std::string key, std::chrono::milliseconds timeout);

  /// etcd refused a write with lease `id` as not found: it expired before a renewal saw it gone
  /// (this agent stood still longer than its TTL, the renewal not yet run since it woke). The next
  /// lease_for grants a new one, as the renewal would have.
  void forget_lease(std::int64_t id);

  /// Ends the renewals (the leases expire on their own); pending grants end with "interrupted".
  void stop();

  /// This agent's own lease id (0 before the first heartbeat was written), for tests.
  std::int64_t node_lease() const { return node_lease_; }

 private:
  EtcdSession(boost::asio::any_io_executor executor, EtcdOptions options);
  Task<std::int64_t> grant_node_lease(std::chrono::milliseconds timeout);
  Task<std::int64_t> job_lease(std::string run_id, std::chrono::milliseconds timeout);
  void start_renewals();
  static Task<void> renew(std::shared_ptr<EtcdSession> self);

  boost::asio::any_io_executor executor_;
  std::shared_ptr<EtcdCluster> cluster_;
  EtcdConnection grants_;  ///< lease grants and the job lease's key (one at a time: see busy_)
  EtcdConnection renewals_;
  bool busy_ = false;  ///< grants_ in use: another caller waits for turn_ to be cancelled
  boost::asio::steady_timer turn_;
  boost::asio::steady_timer renew_timer_;
  bool renewing_ = false;
  bool stopped_ = false;
  std::int64_t node_lease_ = 0;
  std::map<std::string, std::int64_t> job_leases_;
};

}  // namespace ddprun::rendezvous

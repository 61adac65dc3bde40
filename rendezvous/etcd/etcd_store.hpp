#pragma once
/// EtcdStore: the Store interface (store.hpp) on etcd's v3 API, so that the round protocol
/// (round_protocol.hpp) runs over etcd unchanged. One EtcdConnection for its operations and one for
/// its waits (a watch is a stream of its own); the agent's EtcdSession is shared.
///
/// The mapping (keys are the session's key prefix + the store key; every write carries the lease
/// the session picks for the key: etcd_session.hpp):
///  - set: a put;  get: a range, after wait() when missing;
///  - add: +1 is one transaction "holds the marker (or is new) -> put the marker, read the
///    version": etcd counts a key's puts, so N nodes adding at once cost N transactions, not N^2
///    (a read gives the version as the count); any other delta, or a counter set as text, is
///    "unchanged since I read it (mod revision) -> put v+delta", retried when another node got there
///    first;
///  - compare_set: a transaction "created == 0" (expected empty) or "value == expected" -> put,
///    else read: the value that stands;
///  - check, get_if_present: one transaction of ranges;
///  - wait: one look (a transaction of ranges, at revision R), then a watch of a missing key from
///    R+1 on, so that nothing set in between is missed; nobody polls (a long watch is renewed every
///    kWatchSlice, from the revision it reached).
/// A transaction sent twice by a failover (the member died after committing it, before answering)
/// is harmless for compare_set (the compare fails, the read gives what stands) but could count an
/// add twice: the round protocol tolerates a join slot nobody writes (read_joins skips it).
///
/// Errors as EtcdConnection's (EtcdUnreachable, EtcdAuthError are StoreErrors); StoreTimeout
/// when a wait runs out. Use from the loop's thread; one operation at a time, as AsyncStoreClient.
#include "rendezvous/store.hpp"  // first: <utility> before Asio (Boost 1.74)

#include <boost/asio/any_io_executor.hpp>
#include <memory>
#include <string_view>

#include "rendezvous/etcd/etcd_client.hpp"
#include "rendezvous/etcd/etcd_session.hpp"
#include "rendezvous/store_factory.hpp"

namespace ddprun::rendezvous {

class EtcdStore final : public Store {
 public:
  /// The longest one watch stream stays open: then it is opened again from the revision it had
  /// reached, so that a member cut off from the others (which keeps the stream open and silent)
  /// is left for one that answers within a slice.
  static constexpr std::chrono::milliseconds kWatchSlice{std::chrono::seconds(20)};
  /// The value of a counter that add() keeps as the key's version (see add()); every read of the
  /// key gives the count instead, so it never leaves this class.
  static constexpr std::string_view kCountedByVersion = "\x01" "ddprun: counted by version";

  /// `connect_timeout`: how long connect() looks for a member that answers; `timeout`: every other
  /// operation's deadline.
  EtcdStore(boost::asio::any_io_executor executor, std::shared_ptr<EtcdSession> session,
            std::chrono::milliseconds connect_timeout, std::chrono::milliseconds timeout);

  Task<void> set(std::string key, std::string value) override;
  Task<std::string> get(std::string key, std::chrono::milliseconds timeout) override;
  Task<std::int64_t> add(std::string key, std::int64_t delta) override;
  Task<std::string> compare_set(std::string key, std::string expected, std::string desired) override;
  Task<bool> check(std::vector<std::string> keys) override;
  Task<void> wait(std::vector<std::string> keys, std::chrono::milliseconds timeout) override;
  Task<std::vector<std::string>> multi_get(std::vector<std::string> keys, std::chrono::milliseconds timeout) override;
  Task<std::vector<std::optional<std::string>>> get_if_present(std::vector<std::string> keys) override;
  /// Asks a member for the key prefix's revision (and authenticates), retrying over the members
  /// until connect_timeout: EtcdUnreachable names each member and why it failed.
  Task<void> connect() override;
  void cancel() override;
  /// "etcd-v3 at h1:2379,h2:2379".
  std::string address() const override;

  /// Deletes every key under the session's key prefix + `prefix` (tests; a job's own clean-up).
  Task<void> delete_prefix(std::string prefix);

 private:
  /// set, add and compare_set with the lease their key is written with.
  Task<void> set_leased(std::string key, std::string value, std::int64_t lease);
  Task<std::int64_t> add_leased(std::string key, std::int64_t delta, std::int64_t lease);
  Task<std::string> compare_set_leased(std::string key, std::string expected, std::string desired, std::int64_t lease);
  /// The values of `keys` now, and the revision they were read at.
  Task<std::pair<std::int64_t, std::vector<std::optional<std::string>>>> look(std::vector<std::string> keys,
                                                                              std::chrono::milliseconds timeout);
  /// Returns once `key` was put after `revision`; StoreTimeout at `deadline`.
  Task<void> watch_for(std::string key, std::int64_t revision, std::chrono::steady_clock::time_point deadline,
                       std::chrono::milliseconds timeout);

  std::shared_ptr<EtcdSession> session_;
  EtcdConnection requests_;
  EtcdConnection watches_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds timeout_;
};

/// EtcdStore connections sharing `session`; when the last copy of the factory goes, the session
/// stops renewing its leases (the stores it opened keep working until then).
StoreFactory etcd_store_factory(std::shared_ptr<EtcdSession> session);

}  // namespace ddprun::rendezvous

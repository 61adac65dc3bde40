#pragma once
/// StoreFactory: how an agent's rendezvous parts (NodeMembership, JobBoard) open their store
/// connections, so that they run unchanged on a TCPStore (c10d, static) or on etcd (etcd-v3).
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/endpoint.hpp"
#include "rendezvous/store.hpp"

namespace ddprun::rendezvous {

struct StoreFactory {
  /// A new connection on `executor` (not yet connected): connect() gives up after
  /// `connect_timeout`, every other operation is bounded by `timeout` (or its wait's).
  std::function<std::unique_ptr<Store>(boost::asio::any_io_executor executor, std::chrono::milliseconds connect_timeout,
                                       std::chrono::milliseconds timeout)>
      open;
  /// Where the store is, for messages: "127.0.0.1:29400", "etcd-v3 at h1:2379,h2:2379".
  std::string address;
  /// True when an agent of the job hosts the store (TCPStore): losing that agent loses the store.
  bool hosted_by_an_agent = true;
  /// A store that outlives jobs (etcd): where this job's keys live, for the message that the keys
  /// there belong to a job of another shape ("key prefix '/' of etcd-v3 at h1:2379"); else empty.
  std::string key_space;
};

/// TCPStore connections (AsyncStoreClient) to `store`, authenticating with `token` when set.
StoreFactory tcp_store_factory(Endpoint store, std::optional<std::string> token);

}  // namespace ddprun::rendezvous

#pragma once
/// The stores an agent's rendezvous runs on, for tests that must hold on each: the c10d store (a
/// StoreServer on loopback), etcd-v3 over HTTP and etcd-v3 over TLS with client certificates (a
/// real single-member etcd of the test's own, tests/support/etcd_member.hpp). StoreBackendTest is
/// a fixture parametrized by Backend; each node is a Connection (an io_context of its own, run
/// from the calling thread), as agents on several machines would be.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/async_store_client.hpp"
#include "rendezvous/etcd/etcd_store.hpp"
#include "rendezvous/round_protocol.hpp"
#include "rendezvous/store_server.hpp"
#include "tests/support/etcd_member.hpp"
#include "tests/support/loopback_store.hpp"
#include "tests/support/spawn_task.hpp"
#include "tests/support/test_certificates.hpp"

namespace ddprun::testing {

using namespace std::chrono_literals;
using rendezvous::AsyncStoreClient;
using rendezvous::Endpoint;
using rendezvous::EtcdOptions;
using rendezvous::EtcdSession;
using rendezvous::EtcdStore;
using rendezvous::NodeInfo;
using rendezvous::RendezvousError;
using rendezvous::RendezvousSettings;
using rendezvous::RoundDecision;
using rendezvous::RoundProtocol;
using rendezvous::Store;
using rendezvous::StoreClientOptions;
using rendezvous::Task;

/// One node's connection, as an agent has: an io_context of its own, which run() drives from the
/// calling thread until the coroutine completes. With etcd, a session of its own too (its leases).
class Connection {
 public:
  explicit Connection(const StoreClientOptions& options)
      : store_(std::make_unique<AsyncStoreClient>(io_.get_executor(), options)) {}
  explicit Connection(const EtcdOptions& options) : session_(EtcdSession::create(io_.get_executor(), options)) {
    store_ = std::make_unique<EtcdStore>(io_.get_executor(), session_, 10s, 20s);
  }
  ~Connection() {
    store_.reset();
    if (session_) session_->stop();
    io_.restart();
    io_.poll();  // what the stop wound down
  }
  template <class T>
  T run(Task<T> task) {
    return run_to_completion(io_, std::move(task));
  }
  Store& store() { return *store_; }
  EtcdSession* session() { return session_.get(); }
  /// Runs the loop (renewals) for `how_long`.
  void idle(std::chrono::milliseconds how_long) {
    io_.restart();
    io_.run_for(how_long);
  }

 private:
  boost::asio::io_context io_;
  std::shared_ptr<EtcdSession> session_;
  std::unique_ptr<Store> store_;
};

/// etcd_tls: the member speaks only TLS and wants a client certificate its CA signed.
enum class Backend { c10d, etcd, etcd_tls };

inline std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  switch (info.param) {
    case Backend::c10d: return "c10d";
    case Backend::etcd: return "etcd";
    case Backend::etcd_tls: return "etcd_tls";
  }
  return "?";
}

/// A fresh key prefix per test, so that tests never see each other's keys in the one etcd.
inline std::string fresh_prefix() {
  static std::atomic<int> next{0};
  return "/test-" + std::to_string(::getpid()) + "-" + std::to_string(next++) + "/";
}

class StoreBackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::c10d) {
      server_ = start_loopback_store();
      return;
    }
    if (etcd_binary().empty()) GTEST_SKIP() << "etcd is not installed (Debian's etcd-server)";
    EtcdMember::Options member;
    if (GetParam() == Backend::etcd_tls) {
      certificates_ = std::make_unique<TestCertificates>(std::vector<std::string>{"127.0.0.1", "localhost"});
      member.tls_cert = certificates_->server_cert();
      member.tls_key = certificates_->server_key();
      member.tls_client_ca = certificates_->ca();
      etcd_options_.tls = true;
      etcd_options_.cacert = certificates_->ca();
      etcd_options_.cert = certificates_->client_cert();
      etcd_options_.key = certificates_->client_key();
    }
    etcd_ = std::make_unique<EtcdMember>(member);
    ASSERT_TRUE(etcd_->wait_ready()) << "etcd did not come up";
    etcd_options_.endpoints = {Endpoint{"127.0.0.1", std::stoi(etcd_->endpoint().substr(10))}};
    etcd_options_.key_prefix = fresh_prefix();
    etcd_options_.lease_ttl = 2s;
  }

  StoreClientOptions client_options() const {
    StoreClientOptions options;
    options.host = "127.0.0.1";
    options.port = server_->port();
    options.timeout = 20s;
    return options;
  }
  /// A node's connection, for the protocol (and the test's own looks at the keys).
  std::unique_ptr<Connection> connection() {
    if (GetParam() == Backend::c10d) return std::make_unique<Connection>(client_options());
    return std::make_unique<Connection>(etcd_options_);
  }

  /// Each node joins from its own thread and connection; returns the decisions in `nodes` order.
  std::vector<RoundDecision> join_all(const RendezvousSettings& settings, const std::vector<NodeInfo>& nodes) {
    std::vector<std::future<RoundDecision>> joins;
    for (const auto& info : nodes) {
      joins.push_back(std::async(std::launch::async, [this, settings, info] {
        auto node = connection();
        RoundProtocol protocol(node->store(), settings);
        node->run(protocol.check_job(info));
        return node->run(protocol.join(info));
      }));
    }
    std::vector<RoundDecision> decisions;
    for (auto& join : joins) decisions.push_back(join.get());
    return decisions;
  }

  /// The test's own look at the store.
  void wait_for(const std::string& key) {
    auto look = connection();
    look->run(look->store().wait({key}, 20s));
  }
  bool exists(const std::string& key) {
    auto look = connection();
    return look->run(look->store().check({key}));
  }
  void set(const std::string& key, const std::string& value) {
    auto look = connection();
    look->run(look->store().set(key, value));
  }

  std::unique_ptr<rendezvous::StoreServer> server_;
  std::unique_ptr<TestCertificates> certificates_;
  std::unique_ptr<EtcdMember> etcd_;
  EtcdOptions etcd_options_;
};

/// What `join` throws as a RendezvousError; fails the test when it returns instead.
template <class Join>
inline std::string rendezvous_error_of(Join join) {
  try {
    join();
    ADD_FAILURE() << "joined";
  } catch (const RendezvousError& error) {
    return error.what();
  }
  return {};
}


/// Every backend, for INSTANTIATE_TEST_SUITE_P.
inline auto all_backends() { return ::testing::Values(Backend::c10d, Backend::etcd, Backend::etcd_tls); }

}  // namespace ddprun::testing

/// The round protocol's table tests (as tests/integration/round_protocol_test.cpp has them for the
/// TCPStore) run against both stores the agents use: the c10d store (a StoreServer on loopback)
/// and etcd-v3 (EtcdStore on a real single-member etcd on loopback, tests/support/etcd_member.hpp),
/// each node a thread with its own io_context and connection. Then what only etcd has: the Store
/// contract over its transactions and watches, leases that take a dead node's heartbeat away, and
/// the errors a user reads (no member reachable, authentication refused).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "rendezvous/async_store_client.hpp"
#include "rendezvous/etcd_client.hpp"
#include "rendezvous/etcd_json.hpp"
#include "rendezvous/etcd_store.hpp"
#include "rendezvous/round_keys.hpp"
#include "rendezvous/round_protocol.hpp"
#include "rendezvous/store_server.hpp"
#include "tests/support/etcd_member.hpp"
#include "tests/support/loopback_store.hpp"
#include "tests/support/round_fixtures.hpp"
#include "tests/support/spawn_task.hpp"
#include "tests/support/test_certificates.hpp"

using namespace ddprun::rendezvous;
using ddprun::testing::dynamic_job;
using ddprun::testing::EtcdMember;
using ddprun::testing::ids_of;
using ddprun::testing::node;
using ddprun::testing::static_job;
using ddprun::testing::TestCertificates;
using namespace std::chrono_literals;

namespace {

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
    return ddprun::testing::run_to_completion(io_, std::move(task));
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

std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  switch (info.param) {
    case Backend::c10d: return "c10d";
    case Backend::etcd: return "etcd";
    case Backend::etcd_tls: return "etcd_tls";
  }
  return "?";
}

/// A fresh key prefix per test, so that tests never see each other's keys in the one etcd.
std::string fresh_prefix() {
  static std::atomic<int> next{0};
  return "/test-" + std::to_string(::getpid()) + "-" + std::to_string(next++) + "/";
}

class StoreBackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::c10d) {
      server_ = ddprun::testing::start_loopback_store();
      return;
    }
    if (ddprun::testing::etcd_binary().empty()) GTEST_SKIP() << "etcd is not installed (Debian's etcd-server)";
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

  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<TestCertificates> certificates_;
  std::unique_ptr<EtcdMember> etcd_;
  EtcdOptions etcd_options_;
};

/// What `join` throws as a RendezvousError; fails the test when it returns instead.
template <class Join>
std::string rendezvous_error_of(Join join) {
  try {
    join();
    ADD_FAILURE() << "joined";
  } catch (const RendezvousError& error) {
    return error.what();
  }
  return {};
}

// The Store contract, the same on both: the table of compare_set's cases, add, check, wait.
TEST_P(StoreBackendTest, StoreContract) {
  auto n = connection();
  Store& store = n->store();
  struct Case {
    const char* what;
    std::optional<std::string> before;  ///< nullopt: the key is missing
    std::string expected;
    std::string desired;
    std::string returned;
    std::optional<std::string> after;
  };
  const std::vector<Case> cases = {
      {"missing, expected empty: set", std::nullopt, "", "new", "new", "new"},
      {"missing, expected something: left missing", std::nullopt, "old", "new", "old", std::nullopt},
      {"holds expected: replaced", "old", "old", "new", "new", "new"},
      {"holds something else: kept", "other", "old", "new", "other", "other"},
      {"present, expected empty: kept", "other", "", "new", "other", "other"},
  };
  int i = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string key = "ddprun/rdzv/contract/cas" + std::to_string(i++);
    if (c.before) n->run(store.set(key, *c.before));
    EXPECT_EQ(n->run(store.compare_set(key, c.expected, c.desired)), c.returned);
    std::vector<std::string> keys(1, key);
    auto values = n->run(store.get_if_present(keys));
    EXPECT_EQ(values.front(), c.after);
  }
  EXPECT_EQ(n->run(store.add("ddprun/rdzv/contract/counter", 5)), 5);
  EXPECT_EQ(n->run(store.add("ddprun/rdzv/contract/counter", -2)), 3);
  EXPECT_EQ(n->run(store.add("ddprun/rdzv/contract/counter", 0)), 3);
  EXPECT_FALSE(n->run(store.check({"ddprun/rdzv/contract/counter", "ddprun/rdzv/contract/none"})));
  EXPECT_THROW(n->run(store.wait({"ddprun/rdzv/contract/none"}, 200ms)), StoreTimeout);
  // A wait ends when another node sets the key (a watch on etcd, a WAIT on the TCPStore).
  auto setter = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(300ms);
    auto other = connection();
    other->run(other->store().set("ddprun/rdzv/contract/late", "here"));
  });
  EXPECT_EQ(n->run(store.get("ddprun/rdzv/contract/late", 20s)), "here");
  setter.get();
  // Many nodes adding at once: every increment counts once.
  std::vector<std::future<void>> adders;
  for (int k = 0; k < 8; ++k) {
    adders.push_back(std::async(std::launch::async, [&] {
      auto other = connection();
      for (int j = 0; j < 5; ++j) other->run(other->store().add("ddprun/rdzv/contract/many", 1));
    }));
  }
  for (auto& a : adders) a.get();
  EXPECT_EQ(n->run(store.add("ddprun/rdzv/contract/many", 0)), 40);
  // Whatever way a store keeps a counter, reading it gives the count, and any delta goes on from it.
  EXPECT_EQ(n->run(store.get("ddprun/rdzv/contract/many", 1s)), "40");
  EXPECT_EQ(n->run(store.add("ddprun/rdzv/contract/many", 2)), 42);
  EXPECT_EQ(n->run(store.add("ddprun/rdzv/contract/many", 1)), 43);
  EXPECT_EQ(n->run(store.get("ddprun/rdzv/contract/many", 1s)), "43");
}

TEST_P(StoreBackendTest, StaticRanksFollowNodeRankWhateverTheJoinOrder) {
  auto decisions = join_all(static_job(3), {node("c", 2, 2), node("a", 1, 0), node("b", 3, 1)});
  for (const auto& decision : decisions) {
    EXPECT_EQ(encode_decision(decision), encode_decision(decisions.front()));
    EXPECT_EQ(ids_of(decision), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(decision.world_size(), 6);
  }
}

TEST_P(StoreBackendTest, ASecondNodeWithATakenStaticRankIsTurnedAwayAtOnce) {
  RendezvousSettings settings = static_job(2);
  auto holder = std::async(std::launch::async, [&] {
    auto a = connection();
    return a->run(RoundProtocol(a->store(), settings).join(node("a", 1, 1)));
  });
  auto b = connection();
  RoundProtocol protocol(b->store(), settings);
  wait_for(protocol.keys().join_slot(0, 0));
  EXPECT_EQ(rendezvous_error_of([&] { b->run(protocol.join(node("b", 1, 1))); }),
            "node rank 1 is taken by host-a (127.0.0.1), which joined round 0 of job 'job' first: give each node of "
            "the job its own --node-rank");
  auto decisions = join_all(settings, {node("c", 1, 0)});
  EXPECT_EQ(ids_of(decisions.front()), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(ids_of(holder.get()), (std::vector<std::string>{"c", "a"}));
}

TEST_P(StoreBackendTest, AStaticNodeOfAnotherShapeFailsTheNodesWaitingForItWhoeverCameFirst) {
  int job = 0;
  for (const auto& c : ddprun::testing::static_shape_conflicts()) {
    SCOPED_TRACE(c.what);
    RendezvousSettings first = static_job(c.first_nnodes);
    first.run_id = "shape" + std::to_string(job++);
    RendezvousSettings second = static_job(c.second_nnodes);
    second.run_id = first.run_id;
    auto waiting = std::async(std::launch::async, [&] {
      auto a = connection();
      RoundProtocol protocol(a->store(), first);
      a->run(protocol.check_job(node("a", 1, 0)));
      return rendezvous_error_of([&] { a->run(protocol.join(node("a", 1, 0))); });
    });
    auto b = connection();
    RoundProtocol protocol(b->store(), second);
    wait_for(protocol.keys().join_slot(0, 0));
    EXPECT_EQ(rendezvous_error_of([&] { b->run(protocol.check_job(node("b", 1, 1))); }), c.expected);
    EXPECT_EQ(waiting.get(), c.expected);
  }
}

TEST_P(StoreBackendTest, FullRoundClosesAtOnceAndPartialRoundAfterTheLastCall) {
  auto full = join_all(dynamic_job(2, 3), {node("a"), node("b"), node("c")});
  EXPECT_EQ(full.front().nodes.size(), 3U);
  RendezvousSettings settings = dynamic_job(2, 3);
  settings.run_id = "partial";
  auto start = std::chrono::steady_clock::now();
  auto partial = join_all(settings, {node("a"), node("b")});
  EXPECT_GE(std::chrono::steady_clock::now() - start, settings.last_call_timeout);
  EXPECT_EQ(partial.front().nodes.size(), 2U);
  EXPECT_EQ(encode_decision(partial[0]), encode_decision(partial[1]));
}

TEST_P(StoreBackendTest, AfterALostNodeTheSurvivorsFormTheNextRound) {
  RendezvousSettings settings = dynamic_job(2, 3);
  auto first = join_all(settings, {node("a"), node("b"), node("c")}).front();
  const NodeInfo& lost = first.nodes.at(1);
  auto n = connection();
  n->run(RoundProtocol(n->store(), settings).end_round(first.round, RoundEnd{EndKind::lost, lost.id, "lost"}));
  settings.last_call_timeout = 60s;  // the survivors must not wait for it
  std::vector<NodeInfo> survivors;
  for (const auto& each : first.nodes) {
    if (each.id == lost.id) continue;
    NodeInfo again = each;
    again.previous_rank = first.group_rank_of(each.id);
    survivors.push_back(again);
  }
  auto second = join_all(settings, survivors);
  EXPECT_EQ(second.front().round, first.round + 1);
  EXPECT_EQ(second.front().nodes.size(), 2U);
  EXPECT_EQ(second.front().restart_count, 0) << "a lost node uses no restart";
  EXPECT_EQ(second.front().nodes.at(1).id, first.nodes.at(2).id);
}

TEST_P(StoreBackendTest, AFailureCountsARestartForTheNextRound) {
  RendezvousSettings settings = dynamic_job(2, 2);
  auto first = join_all(settings, {node("a"), node("b")}).front();
  auto a = connection();
  a->run(RoundProtocol(a->store(), settings).end_round(first.round, RoundEnd{EndKind::failure, "a", "rank 0 failed"}));
  auto second = join_all(settings, {node("a"), node("b")}).front();
  EXPECT_EQ(second.round, 1);
  EXPECT_EQ(second.restart_count, 1);
}

TEST_P(StoreBackendTest, ANodeArrivingDuringARoundEndsItAndTheNextRoundIncludesIt) {
  RendezvousSettings settings = dynamic_job(2, 3);
  auto first = join_all(settings, {node("a"), node("b")}).front();
  auto late = std::async(std::launch::async, [&] {
    auto c = connection();
    return c->run(RoundProtocol(c->store(), settings).join(node("c")));
  });
  auto a = connection();
  RoundEnd end = a->run(RoundProtocol(a->store(), settings).wait_end(first.round, 20s));
  EXPECT_EQ(end.kind, EndKind::joined);
  EXPECT_EQ(end.node, "c");
  auto second = join_all(settings, {node("a"), node("b")});
  RoundDecision with_late = late.get();
  EXPECT_EQ(with_late.nodes.size(), 3U);
  EXPECT_EQ(encode_decision(with_late), encode_decision(second.front()));
}

TEST_P(StoreBackendTest, WhenEveryNodeFinishedTheJobIsClosedToLateNodes) {
  RendezvousSettings settings = dynamic_job(2, 3);
  auto decisions = join_all(settings, {node("a"), node("b")});
  auto a = connection();
  RoundProtocol protocol(a->store(), settings);
  a->run(protocol.mark_finished(decisions.front(), node("a")));
  EXPECT_FALSE(exists(protocol.keys().end(decisions.front().round))) << "b has not finished yet";
  a->run(protocol.mark_finished(decisions.front(), node("b")));
  EXPECT_EQ(a->run(protocol.wait_end(decisions.front().round, 5s)).kind, EndKind::finished);
  try {
    a->run(protocol.join(node("late")));
    FAIL() << "a late node joined a finished job";
  } catch (const RendezvousClosed& error) {
    EXPECT_NE(std::string(error.what()).find("already finished"), std::string::npos) << error.what();
  }
}

TEST_P(StoreBackendTest, JoinTimeoutNamesWhoJoinedAndWhatIsMissing) {
  RendezvousSettings settings = dynamic_job(3, 3);
  settings.join_timeout = 500ms;
  auto alone = connection();
  RoundProtocol protocol(alone->store(), settings);
  try {
    alone->run(protocol.join(node("alone")));
    FAIL() << "a round of one formed with MIN 3";
  } catch (const RendezvousError& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("did not form within 500 ms"), std::string::npos) << message;
    EXPECT_NE(message.find("host-alone (127.0.0.1)"), std::string::npos) << message;
  }
}

TEST_P(StoreBackendTest, ANodeOfAnotherShapeIsTurnedAway) {
  auto n = connection();
  auto check = [&](const RendezvousSettings& settings, const NodeInfo& self) {
    RoundProtocol protocol(n->store(), settings);
    n->run(protocol.check_job(self));
  };
  check(dynamic_job(2, 4), node("a"));
  check(dynamic_job(2, 4), node("b"));
  EXPECT_EQ(rendezvous_error_of([&] { check(dynamic_job(2, 3), node("c")); }),
            "node host-c (127.0.0.1) says --nnodes=2:3, but this job was started with --nnodes=2:4 by node host-a "
            "(127.0.0.1): start every node of a job with the same --nnodes");
}

TEST_P(StoreBackendTest, HeartbeatsAreCountersAndAMissingOneReadsAsMinusOne) {
  auto n = connection();
  RoundProtocol protocol(n->store(), dynamic_job(1, 1));
  n->run(protocol.beat("a", 7));
  n->run(n->store().set(protocol.keys().heartbeat("b"), "not a number"));
  EXPECT_EQ(n->run(protocol.read_beats({"a", "b", "c"})), (std::vector<std::int64_t>{7, -1, -1}));
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreBackendTest, ::testing::Values(Backend::c10d, Backend::etcd, Backend::etcd_tls),
                         backend_name);

// What only etcd has.
class EtcdOnlyTest : public StoreBackendTest {};

TEST_P(EtcdOnlyTest, ADeadNodesHeartbeatVanishesWithItsLease) {
  RendezvousSettings settings = dynamic_job(1, 1);
  auto watcher = connection();
  RoundProtocol looks(watcher->store(), settings);
  {
    auto dying = connection();
    dying->run(RoundProtocol(dying->store(), settings).beat("dying", 1));
    dying->idle(1500ms);  // renews its 2 s lease meanwhile
    EXPECT_EQ(watcher->run(looks.read_beats({"dying"})), (std::vector<std::int64_t>{1})) << "renewed, kept";
  }  // the node is gone: nobody renews its lease
  const auto until = std::chrono::steady_clock::now() + 10s;
  std::vector<std::int64_t> beats;
  while (std::chrono::steady_clock::now() < until) {
    beats = watcher->run(looks.read_beats({"dying"}));
    if (beats.front() == -1) break;
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(beats, (std::vector<std::int64_t>{-1})) << "the heartbeat outlived its lease";
  // The job's own keys (round, shape) stay while any agent of the job renews the job's lease.
  watcher->run(watcher->store().set(looks.keys().current_round(), "0"));
  watcher->idle(3s);
  EXPECT_TRUE(exists(looks.keys().current_round()));
}

TEST_P(EtcdOnlyTest, NoReachableMemberIsNamedWithHowLongItWasTried) {
  EtcdOptions options = etcd_options_;
  options.endpoints = {Endpoint{"127.0.0.1", ddprun::testing::free_port()}, Endpoint{"127.0.0.1", ddprun::testing::free_port()}};
  boost::asio::io_context io;
  auto session = EtcdSession::create(io.get_executor(), options);
  EtcdStore store(io.get_executor(), session, 1s, 1s);
  try {
    ddprun::testing::run_to_completion(io, store.connect());
    FAIL() << "connected to nothing";
  } catch (const EtcdUnreachable& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("no etcd member answered within 1 s"), std::string::npos) << message;
    EXPECT_NE(message.find(format_endpoint("127.0.0.1", options.endpoints[0].port) + " (Connection refused)"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(format_endpoint("127.0.0.1", options.endpoints[1].port) + " ("), std::string::npos) << message;
  }
  session->stop();
}

TEST_P(EtcdOnlyTest, AWrongPasswordIsAnAuthenticationErrorAndNoneIsToo) {
  const std::string endpoint = etcd_->endpoint();
  const std::string etcdctl = "ETCDCTL_API=3 etcdctl --endpoints=" + endpoint + " ";
  ASSERT_EQ(std::system((etcdctl + "user add root:secret >/dev/null 2>&1 && " + etcdctl +
                         "auth enable >/dev/null 2>&1").c_str()),
            0)
      << "could not turn on etcd's authentication";
  for (const auto& [user, password, expected] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"root", "wrong", "authentication failed"}, {"", "", "user name is empty"}}) {
    EtcdOptions options = etcd_options_;
    options.user = user;
    options.password = password;
    boost::asio::io_context io;
    auto session = EtcdSession::create(io.get_executor(), options);
    EtcdStore store(io.get_executor(), session, 5s, 5s);
    try {
      ddprun::testing::run_to_completion(io, store.set("ddprun/rdzv/auth/x", "1"));
      ADD_FAILURE() << "etcd took the request of user '" << user << "'";
    } catch (const EtcdAuthError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(expected), std::string::npos) << message;
      EXPECT_NE(message.find("--rdzv-conf"), std::string::npos) << message;
    }
    session->stop();
  }
  // The right password works.
  EtcdOptions options = etcd_options_;
  options.user = "root";
  options.password = "secret";
  boost::asio::io_context io;
  auto session = EtcdSession::create(io.get_executor(), options);
  EtcdStore store(io.get_executor(), session, 5s, 5s);
  ddprun::testing::run_to_completion(io, store.set("ddprun/rdzv/auth/x", "1"));
  EXPECT_EQ(ddprun::testing::run_to_completion(io, store.get("ddprun/rdzv/auth/x", 1s)), "1");
  session->stop();
}

INSTANTIATE_TEST_SUITE_P(Stores, EtcdOnlyTest, ::testing::Values(Backend::etcd), backend_name);

// etcd's auth token lapses after --auth-token-ttl seconds unused: the store gets a new one when etcd
// says "invalid auth token", and the request goes through.
TEST(EtcdAuthToken, AnExpiredTokenIsRenewedAndTheRequestGoesThrough) {
  if (ddprun::testing::etcd_binary().empty()) GTEST_SKIP() << "etcd is not installed (Debian's etcd-server)";
  EtcdMember::Options member;
  member.extra = {"--auth-token-ttl", "2"};
  EtcdMember etcd(member);
  ASSERT_TRUE(etcd.wait_ready());
  const std::string etcdctl = "ETCDCTL_API=3 etcdctl --endpoints=" + etcd.endpoint() + " ";
  ASSERT_EQ(std::system((etcdctl + "user add root:secret >/dev/null 2>&1 && " + etcdctl +
                         "auth enable >/dev/null 2>&1").c_str()),
            0)
      << "could not turn on etcd's authentication";
  EtcdOptions options;
  options.endpoints = {Endpoint{"127.0.0.1", std::stoi(etcd.endpoint().substr(10))}};
  options.key_prefix = fresh_prefix();
  boost::asio::io_context io;
  auto run = [&io](auto task) { return ddprun::testing::run_to_completion(io, std::move(task)); };

  // A token of the test's own, to show that etcd lets it lapse within the wait below.
  auto bare = std::make_shared<EtcdCluster>(options);
  EtcdConnection raw(io.get_executor(), bare);
  bare->token = etcd::parse_token(run(raw.call("/v3/auth/authenticate", etcd::authenticate_body("root", "secret"), 5s)));
  run(raw.call("/v3/kv/range", etcd::range_body(options.key_prefix + "x"), 5s));

  options.user = "root";
  options.password = "secret";
  auto session = EtcdSession::create(io.get_executor(), options);
  {
    EtcdStore store(io.get_executor(), session, 5s, 5s);
    run(store.set("worker/key", "1"));  // a key of no lease: nothing renews anything while the test sleeps
    std::this_thread::sleep_for(4s);
    try {
      run(raw.call("/v3/kv/range", etcd::range_body(options.key_prefix + "x"), 5s));
      ADD_FAILURE() << "etcd still took a token unused for 4 s: this test shows nothing";
    } catch (const EtcdAuthError& error) {
      EXPECT_NE(std::string(error.what()).find("invalid auth token"), std::string::npos) << error.what();
    }
    EXPECT_EQ(run(store.get("worker/key", 5s)), "1");
  }
  session->stop();
}

}  // namespace

// TLS: what a user reads when the two sides disagree. Each case must end at once with one line
// that names the cause, not after the join timeout (etcd refuses a missing or foreign client
// certificate only after the TLS 1.3 handshake, and closes a plain HTTP connection without a word).
class EtcdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ddprun::testing::etcd_binary().empty()) GTEST_SKIP() << "etcd is not installed (Debian's etcd-server)";
  }

  /// A member that speaks TLS with `certificates`' server certificate and wants a client certificate.
  static std::unique_ptr<EtcdMember> tls_member(const TestCertificates& certificates) {
    EtcdMember::Options member;
    member.tls_cert = certificates.server_cert();
    member.tls_key = certificates.server_key();
    member.tls_client_ca = certificates.ca();
    auto etcd = std::make_unique<EtcdMember>(member);
    EXPECT_TRUE(etcd->wait_ready()) << "etcd did not come up";
    return etcd;
  }
  static EtcdOptions options_for(const EtcdMember& etcd, const std::string& host = "127.0.0.1") {
    EtcdOptions options;
    options.endpoints = {Endpoint{host, std::stoi(etcd.endpoint().substr(10))}};
    options.key_prefix = fresh_prefix();
    return options;
  }

  struct Outcome {
    std::string error;  ///< "" when it connected
    bool auth = false;  ///< an EtcdAuthError
    bool unreachable = false;
    std::chrono::milliseconds took{};
  };
  /// Connects as an agent does (10 s to find a member) and writes a key.
  static Outcome connect(const EtcdOptions& options) {
    boost::asio::io_context io;
    auto session = EtcdSession::create(io.get_executor(), options);
    Outcome outcome;
    const auto start = std::chrono::steady_clock::now();
    {
      EtcdStore store(io.get_executor(), session, 10s, 10s);
      try {
        ddprun::testing::run_to_completion(io, store.connect());
        ddprun::testing::run_to_completion(io, store.set("ddprun/rdzv/tls/x", "1"));
      } catch (const EtcdAuthError& error) {
        outcome.error = error.what();
        outcome.auth = true;
      } catch (const EtcdUnreachable& error) {
        outcome.error = error.what();
        outcome.unreachable = true;
      } catch (const StoreError& error) {
        outcome.error = error.what();
      }
    }
    outcome.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    session->stop();
    io.restart();
    io.poll();
    return outcome;
  }
};

TEST_F(EtcdTlsTest, EveryDisagreementIsOneLineAtOnce) {
  const TestCertificates certificates({"127.0.0.1", "localhost"});
  auto etcd = tls_member(certificates);
  const TestCertificates only_localhost({"localhost"});
  auto etcd_for_localhost = tls_member(only_localhost);
  EtcdMember plain;
  ASSERT_TRUE(plain.wait_ready());

  auto tls = [](EtcdOptions options, const TestCertificates& c, const std::string& cacert) {
    options.tls = true;
    options.cacert = cacert;
    options.cert = c.client_cert();
    options.key = c.client_key();
    return options;
  };
  struct Case {
    const char* what;
    EtcdOptions options;
    bool auth;             ///< an EtcdAuthError (else a StoreError that is not EtcdUnreachable)
    std::string expected;  ///< in the message
  };
  EtcdOptions no_client_certificate = tls(options_for(*etcd), certificates, certificates.ca());
  no_client_certificate.cert.clear();
  no_client_certificate.key.clear();
  EtcdOptions stranger = tls(options_for(*etcd), certificates, certificates.ca());
  stranger.cert = certificates.stranger_cert();
  stranger.key = certificates.stranger_key();
  const std::vector<Case> cases = {
      {"no client certificate", no_client_certificate, true,
       "etcd may want a client certificate (--client-cert-auth): set cert and key in --rdzv-conf"},
      {"a client certificate another CA signed", stranger, true,
       "etcd refused the client certificate cert=" + certificates.stranger_cert()},
      {"etcd's certificate signed by a CA we do not trust", tls(options_for(*etcd), certificates, certificates.other_ca()),
       true, "certificate verify failed (unable to get local issuer certificate): check cacert in --rdzv-conf"},
      {"etcd's certificate does not hold the name we connect to",
       tls(options_for(*etcd_for_localhost), only_localhost, only_localhost.ca()), true,
       "is a name the certificate holds"},
      {"plain HTTP to a member that speaks TLS", options_for(*etcd), false,
       "speaks TLS: write https://" + etcd->endpoint() + " in --rdzv-endpoint"},
      {"TLS to a member that speaks plain HTTP", tls(options_for(plain), certificates, certificates.ca()), false,
       "does not speak TLS"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const Outcome outcome = connect(c.options);
    EXPECT_EQ(outcome.auth, c.auth) << outcome.error;
    EXPECT_FALSE(outcome.unreachable) << outcome.error;
    EXPECT_NE(outcome.error.find(c.expected), std::string::npos) << outcome.error;
    EXPECT_EQ(outcome.error.find('\n'), std::string::npos) << outcome.error;
    EXPECT_LT(outcome.took, 3s) << outcome.error;
  }
  // And the right settings work, by IP address and by name.
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    EXPECT_EQ(connect(tls(options_for(*etcd, host), certificates, certificates.ca())).error, "") << host;
  }
}

/// The Store contract on every backend an agent's rendezvous runs on (tests/support/store_backends.hpp:
/// the c10d store, etcd-v3 over HTTP and over TLS; the round protocol's tests on each are in
/// round_protocol_test.cpp). Then what only etcd has: leases that take a dead node's heartbeat
/// away, an auth token that lapses and is renewed, and the errors a user reads (no member
/// reachable, authentication refused, every way the two sides of TLS can disagree).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "rendezvous/etcd/etcd_client.hpp"
#include "rendezvous/etcd/etcd_json.hpp"
#include "rendezvous/etcd/etcd_store.hpp"
#include "rendezvous/round_protocol.hpp"
#include "tests/support/round_fixtures.hpp"
#include "tests/support/store_backends.hpp"

using namespace ddprun::rendezvous;
using ddprun::testing::Backend;
using ddprun::testing::dynamic_job;
using ddprun::testing::EtcdMember;
using ddprun::testing::fresh_prefix;
using ddprun::testing::StoreBackendTest;
using ddprun::testing::TestCertificates;
using namespace std::chrono_literals;

namespace {

class StoreContractTest : public StoreBackendTest {};

// The Store contract, the same on every backend: the table of compare_set's cases, add, check, wait.
TEST_P(StoreContractTest, StoreContract) {
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

INSTANTIATE_TEST_SUITE_P(Stores, StoreContractTest, ddprun::testing::all_backends(), ddprun::testing::backend_name);

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

// A node frozen past its lease's TTL can wake before its renewal has seen the lease gone: its next
// write carries the expired lease, which etcd refuses whole ("requested lease not found"). The store
// makes it again with a new lease, rather than end the agent as if etcd were lost (the lease is
// revoked here behind the session's back, as an expiry during a freeze takes it).
TEST_P(EtcdOnlyTest, AWriteWithALeaseGoneUnseenIsMadeAgainWithANewLease) {
  RendezvousSettings settings = dynamic_job(1, 1);
  auto node = connection();
  RoundProtocol protocol(node->store(), settings);
  node->run(protocol.beat("frozen", 1));
  const std::int64_t old_lease = node->session()->node_lease();
  ASSERT_NE(old_lease, 0);
  boost::asio::io_context io;
  EtcdConnection raw(io.get_executor(), std::make_shared<EtcdCluster>(etcd_options_));
  ddprun::testing::run_to_completion(io, raw.call("/v3/lease/revoke", etcd::lease_id_body(old_lease), 5s));
  EXPECT_NO_THROW(node->run(protocol.beat("frozen", 2)));
  EXPECT_NE(node->session()->node_lease(), old_lease);
  EXPECT_NE(node->session()->node_lease(), 0);
  auto watcher = connection();
  EXPECT_EQ(watcher->run(RoundProtocol(watcher->store(), settings).read_beats({"frozen"})),
            (std::vector<std::int64_t>{2}));
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

TEST_P(EtcdOnlyTest, AWrongPasswordNoUserAndNoRoleAreAuthenticationErrorsNamingTheFix) {
  const std::string endpoint = etcd_->endpoint();
  const std::string etcdctl = "ETCDCTL_API=3 etcdctl --endpoints=" + endpoint + " ";
  ASSERT_EQ(std::system((etcdctl + "user add root:secret >/dev/null 2>&1 && " + etcdctl +
                         "auth enable >/dev/null 2>&1").c_str()),
            0)
      << "could not turn on etcd's authentication";
  // alice: the right password but no role on the prefix, so the advice is the grant, not the password.
  ASSERT_EQ(std::system((etcdctl + "--user root:secret user add alice:pw >/dev/null 2>&1").c_str()), 0);
  for (const auto& [user, password, expected] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"root", "wrong", "authentication failed, invalid user ID or password (check user and password in --rdzv-conf)"},
           {"", "", "user name is empty (set user and password in --rdzv-conf)"},
           {"alice", "pw", "permission denied (user 'alice' may not use the keys under key_prefix '" +
                               etcd_options_.key_prefix + "': grant one of its roles readwrite on that prefix"}}) {
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

INSTANTIATE_TEST_SUITE_P(Stores, EtcdOnlyTest, ::testing::Values(Backend::etcd), ddprun::testing::backend_name);

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

/// A fake etcd member on loopback for tests of broken or hostile endpoints: for each connection,
/// reads the request (whatever it is) and lets `answer` write to the socket, then closes it.
class FakeMember {
 public:
  explicit FakeMember(std::function<void(int fd, const std::atomic<bool>& stop)> answer) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(listener_, 4) != 0) {
      throw std::runtime_error("the fake member cannot listen");
    }
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, answer = std::move(answer)] {
      while (!stop_) {
        pollfd ready{listener_, POLLIN, 0};
        if (::poll(&ready, 1, 100) <= 0) continue;
        const int fd = ::accept(listener_, nullptr, nullptr);
        char request[4096];
        (void)::recv(fd, request, sizeof request, 0);
        answer(fd, stop_);
        ::close(fd);
      }
    });
  }
  ~FakeMember() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

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
       "certificate verify failed (IP address mismatch): etcd's certificate does not hold the name the endpoint is "
       "written with"},
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
  // A member that fails so (its certificate, its protocol) is left for the others: one member's
  // expired certificate must not end a job the others can serve. Only when every member fails so
  // is it an error, at once.
  auto both = [&](const EtcdMember& first, const EtcdMember& second) {
    EtcdOptions options = tls(options_for(first), certificates, certificates.ca());
    options.endpoints.push_back(options_for(second).endpoints.front());
    return options;
  };
  EXPECT_EQ(connect(both(*etcd_for_localhost, *etcd)).error, "") << "a member whose name does not verify, then a good one";
  EXPECT_EQ(connect(both(plain, *etcd)).error, "") << "a member without TLS, then a good one";
  const Outcome none = connect(both(plain, *etcd_for_localhost));
  EXPECT_FALSE(none.unreachable) << none.error;
  EXPECT_NE(none.error.find("etcd at " + plain.endpoint() + " does not speak TLS"), std::string::npos)
      << "the first member's reason: " << none.error;
  EXPECT_LT(none.took, 3s) << none.error;
}

// Something that is not etcd on the port: one line that says so, at once.
TEST_F(EtcdTlsTest, AServerThatIsNotEtcdIsNamedOnOneLine) {
  EtcdOptions options;
  options.key_prefix = fresh_prefix();
  Outcome outcome;
  {
    FakeMember web([](int fd, const std::atomic<bool>&) {
      const std::string page = "<!DOCTYPE HTML>\n<html>\n<body>Unsupported method ('POST')</body>\n</html>\n";
      const std::string reply = "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/html\r\nContent-Length: " +
                                std::to_string(page.size()) + "\r\n\r\n" + page;
      (void)::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
    });
    options.endpoints = {Endpoint{"127.0.0.1", web.port()}};
    outcome = connect(options);
  }
  EXPECT_FALSE(outcome.unreachable) << outcome.error;
  EXPECT_NE(outcome.error.find("answered /v3/kv/range with HTTP 501, not as etcd's v3 API does (is it etcd's client "
                               "port, etcd 3.4 or later?): <!DOCTYPE HTML> <html> <body>"),
            std::string::npos)
      << outcome.error;
  EXPECT_EQ(outcome.error.find('\n'), std::string::npos) << outcome.error;
  EXPECT_LT(outcome.took, 3s);
}

// Something that does not speak HTTP at all on a member's port (an ssh server's banner; a TCPStore,
// which closes the connection without a byte) is left for a member that is etcd, as a member of
// the other protocol is; only when no member speaks HTTP is it an error, at once, naming the first.
TEST_F(EtcdTlsTest, AMemberThatDoesNotSpeakHttpIsLeftForOneThatDoes) {
  EtcdMember etcd;
  ASSERT_TRUE(etcd.wait_ready());
  FakeMember ssh([](int fd, const std::atomic<bool>&) {
    const std::string banner = "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n";
    (void)::send(fd, banner.data(), banner.size(), MSG_NOSIGNAL);
  });
  FakeMember tcp_store([](int, const std::atomic<bool>&) {});  // reads the request, closes without a byte
  const Endpoint good = options_for(etcd).endpoints.front();
  const Endpoint banner{"127.0.0.1", ssh.port()};
  const Endpoint silent{"127.0.0.1", tcp_store.port()};
  auto members = [](std::vector<Endpoint> endpoints) {
    EtcdOptions options;
    options.endpoints = std::move(endpoints);
    options.key_prefix = fresh_prefix();
    return options;
  };
  EXPECT_EQ(connect(members({banner, good})).error, "") << "an ssh server, then etcd";
  EXPECT_EQ(connect(members({silent, good})).error, "") << "a TCPStore, then etcd";
  const Outcome none = connect(members({banner, silent}));
  EXPECT_FALSE(none.unreachable) << none.error;
  EXPECT_NE(none.error.find("the server at 127.0.0.1:" + std::to_string(ssh.port()) +
                            " does not speak HTTP (it sent 'SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3')"),
            std::string::npos)
      << "the first member's reason: " << none.error;
  EXPECT_LT(none.took, 3s) << none.error;
}

// OpenSSL would prompt for the passphrase (on a terminal: forever; without one: reading stdin).
TEST_F(EtcdTlsTest, AnEncryptedKeyIsNamedWithoutAPrompt) {
  const TestCertificates certificates({"127.0.0.1"});
  EtcdOptions options;
  options.endpoints = {Endpoint{"127.0.0.1", 2379}};
  options.tls = true;
  options.cacert = certificates.ca();
  options.cert = certificates.client_cert();
  options.key = certificates.client_key_encrypted();
  try {
    EtcdCluster cluster(options);
    ADD_FAILURE() << "took an encrypted key without its passphrase";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("it is encrypted with a passphrase, which ddprun does not ask for"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(EtcdTlsTest, AFileThatCannotBeReadIsNamed) {
  EtcdOptions options;
  options.endpoints = {Endpoint{"127.0.0.1", 2379}};
  options.tls = true;
  options.cacert = "/nonexistent/ca.pem";
  try {
    EtcdCluster cluster(options);
    ADD_FAILURE() << "took a CA file that does not exist";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), "cannot read the etcd CA certificate cacert=/nonexistent/ca.pem: No such file or directory");
  }
}

// A member that streams a watch message without end (a broken or hostile endpoint): the client
// leaves it once the message passes kMaxWatchMessage, instead of growing without bound.
TEST(EtcdStream, AMessageWithoutEndIsCutOffAtTheBound) {
  std::atomic<std::size_t> most_sent{0};
  std::size_t lines = 0;
  {
    FakeMember member([&most_sent](int fd, const std::atomic<bool>& stop) {
      const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
      (void)::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
      const std::string chunk = "10000\r\n" + std::string(0x10000, 'x') + "\r\n";
      std::size_t sent = 0;
      while (!stop && sent < 64u << 20 && ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0) sent += 0x10000;
      most_sent = std::max<std::size_t>(most_sent, sent);
    });
    EtcdOptions options;
    options.endpoints = {Endpoint{"127.0.0.1", member.port()}};
    boost::asio::io_context io;
    EtcdConnection connection(io.get_executor(), std::make_shared<EtcdCluster>(options));
    try {
      ddprun::testing::run_to_completion(
          io, connection.stream("/v3/watch", [] { return std::string("{}"); },
                                [&](const std::string&) { return ++lines, false; }, 3s));
      ADD_FAILURE() << "the stream ended";
    } catch (const EtcdUnreachable& error) {
      EXPECT_NE(std::string(error.what()).find("sent a watch message over 16 MiB"), std::string::npos) << error.what();
    } catch (const StoreError& error) {
      ADD_FAILURE() << error.what();
    }
  }
  EXPECT_EQ(lines, 0U);
  EXPECT_LT(most_sent.load(), 64u << 20) << "the client read on past the bound";
}

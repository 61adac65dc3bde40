// StoreClient against the real StoreServer on loopback: every operation, waits woken by other
// clients, timeouts that leave the connection usable, many clients at once, connect retry, a store
// that stops under a blocked client, authentication, and binary and large values.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/store_client.hpp"
#include "rendezvous/store_server.hpp"
#include "rendezvous/wire.hpp"
#include "raw_peer.hpp"

namespace ddprun::rendezvous {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;

/// Generous bound on anything that must not hang; never a timing assertion.
constexpr auto kNoHang = 20s;

std::unique_ptr<StoreServer> start_server(std::optional<std::string> token = std::nullopt, int port = 0,
                                          std::string host = "127.0.0.1") {
  StoreServerOptions options;
  options.host = std::move(host);
  options.port = port;
  options.token = std::move(token);
  auto server = std::make_unique<StoreServer>(options);
  server->start();
  return server;
}

StoreClientOptions options_for(int port, std::optional<std::string> token = std::nullopt) {
  StoreClientOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.connect_timeout = 10s;
  options.timeout = 30s;
  options.token = std::move(token);
  return options;
}

/// A port nothing listens on (bound, read back, released).
int free_port() {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  return acceptor.local_endpoint().port();
}

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class StoreClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<StoreServer> server = start_server();
  StoreClient client{options_for(server->port())};
  std::string address = "127.0.0.1:" + std::to_string(server->port());
};

TEST_F(StoreClientTest, SetGetAndAddress) {
  EXPECT_EQ(client.address(), address);
  client.set("alpha", "one");
  EXPECT_EQ(client.get("alpha"), "one");
  client.set("alpha", "");
  EXPECT_EQ(client.get("alpha"), "");
}

TEST_F(StoreClientTest, AddCountsFromZeroAndGetReadsTheDecimalText) {
  EXPECT_EQ(client.add("counter", 5), 5);
  EXPECT_EQ(client.add("counter", -7), -2);
  EXPECT_EQ(client.get("counter"), "-2");
}

TEST_F(StoreClientTest, CompareSetFollowsPyTorch) {
  // Missing key, empty expected: set.
  EXPECT_EQ(client.compare_set("cas", "", "first"), "first");
  EXPECT_EQ(client.get("cas"), "first");
  // Present but not equal: no change, the current value comes back.
  EXPECT_EQ(client.compare_set("cas", "other", "second"), "first");
  // Present and equal: set.
  EXPECT_EQ(client.compare_set("cas", "first", "second"), "second");
  EXPECT_EQ(client.get("cas"), "second");
  // Missing key, non-empty expected: no set, `expected` comes back.
  EXPECT_EQ(client.compare_set("missing", "x", "y"), "x");
  EXPECT_FALSE(client.check({"missing"}));
}

TEST_F(StoreClientTest, CheckNumKeysDeleteAppend) {
  EXPECT_TRUE(client.check({}));
  EXPECT_FALSE(client.check({"a"}));
  client.set("a", "1");
  client.set("b", "2");
  EXPECT_TRUE(client.check({"a", "b"}));
  EXPECT_FALSE(client.check({"a", "c"}));
  EXPECT_EQ(client.num_keys(), 2);
  EXPECT_TRUE(client.delete_key("a"));
  EXPECT_FALSE(client.delete_key("a"));
  EXPECT_EQ(client.num_keys(), 1);
  client.append("log", "x");
  client.append("log", "yz");
  EXPECT_EQ(client.get("log"), "xyz");
}

TEST_F(StoreClientTest, MultiSetAndMultiGet) {
  client.multi_set({"k1", "k2", "k3"}, {"v1", "", std::string("\0v3", 3)});
  EXPECT_EQ(client.multi_get({"k3", "k1", "k2"}), (std::vector<std::string>{std::string("\0v3", 3), "v1", ""}));
  EXPECT_EQ(client.multi_get({}), std::vector<std::string>{});
  EXPECT_THROW(client.multi_set({"a"}, {}), std::invalid_argument);
}

TEST_F(StoreClientTest, QueuePushPopLen) {
  EXPECT_EQ(client.queue_len("q"), 0);
  client.queue_push("q", "first");
  client.queue_push("q", "second");
  EXPECT_EQ(client.queue_len("q"), 2);
  EXPECT_EQ(client.queue_pop("q", 5s), "first");
  EXPECT_EQ(client.queue_pop("q", 5s), "second");
  EXPECT_EQ(client.queue_len("q"), 0);
}

TEST_F(StoreClientTest, QueuePopBlocksUntilAnotherClientPushes) {
  auto pushed = std::async(std::launch::async, [&] {
    StoreClient other(options_for(server->port()));
    std::this_thread::sleep_for(100ms);
    other.queue_push("jobs", "job-1");
  });
  EXPECT_EQ(client.queue_pop("jobs", kNoHang), "job-1");
  pushed.get();
}

TEST_F(StoreClientTest, QueuePopTimesOutAndTheConnectionStaysUsable) {
  std::string message = what_of([&] { client.queue_pop("empty", 100ms); });
  EXPECT_TRUE(contains(message, "QUEUE_POP for \"/empty\" timed out")) << message;
  EXPECT_THROW(client.queue_pop("empty", 50ms), StoreTimeout);
  client.queue_push("empty", "now");
  EXPECT_EQ(client.queue_pop("empty", 5s), "now");
}

TEST_F(StoreClientTest, Ping) { client.ping(); }

TEST_F(StoreClientTest, KeysAreSentWithTheSlashPrefixLikePyTorch) {
  client.set("foo", "bar");
  // A raw current-dialect peer reads "/foo", as a Python TCPStore client's get("foo") would.
  ddprun::testing::RawPeer peer(server->port());
  wire::Request validate;
  validate.op = wire::Op::validate;
  wire::Request get;
  get.op = wire::Op::get;
  get.keys = {"/foo"};
  peer.send(wire::encode_request(wire::Dialect::current, validate) + wire::encode_request(wire::Dialect::current, get));
  EXPECT_EQ(peer.read_value(), "bar");
}

TEST_F(StoreClientTest, WaitIsWokenByAnotherClient) {
  auto setter = std::async(std::launch::async, [&] {
    StoreClient other(options_for(server->port()));
    std::this_thread::sleep_for(100ms);
    other.set("ready_a", "1");
    std::this_thread::sleep_for(50ms);
    other.set("ready_b", "1");
  });
  client.wait({"ready_a", "ready_b"}, kNoHang);
  EXPECT_TRUE(client.check({"ready_a", "ready_b"}));
  setter.get();
}

TEST_F(StoreClientTest, GetWaitsForTheKey) {
  auto setter = std::async(std::launch::async, [&] {
    StoreClient other(options_for(server->port()));
    std::this_thread::sleep_for(100ms);
    other.set("late", "value");
  });
  EXPECT_EQ(client.get("late", kNoHang), "value");
  setter.get();
}

TEST_F(StoreClientTest, WaitTimeoutNamesKeyAndAddressAndLeavesTheConnectionUsable) {
  try {
    client.wait({"rank_3_ready"}, 200ms);
    FAIL() << "expected StoreTimeout";
  } catch (const StoreTimeout& e) {
    EXPECT_EQ(std::string(e.what()), "store " + address + ": WAIT for \"/rank_3_ready\" timed out after 200 ms");
  }
  client.set("after", "timeout");
  EXPECT_EQ(client.get("after"), "timeout");
  client.ping();
  // The cancelled wait does not fire later into another call's reply.
  client.set("rank_3_ready", "1");
  EXPECT_EQ(client.add("n", 1), 1);
  client.wait({"rank_3_ready"}, 1s);
}

TEST_F(StoreClientTest, GetTimeoutIsAStoreTimeout) {
  std::string message;
  try {
    client.get("never", 150ms);
  } catch (const StoreTimeout& e) {
    message = e.what();
  }
  EXPECT_EQ(message, "store " + address + ": GET for \"/never\" timed out after 150 ms waiting for the key to be set");
  client.set("never", "now");
  EXPECT_EQ(client.get("never", 1s), "now");
}

TEST_F(StoreClientTest, WaitTimeoutRacingTheKeyKeepsTheConnectionInStep) {
  // Sets land around the moment each wait gives up, so some replies race the CANCEL_WAIT
  // (STOP_WAITING then WAIT_CANCELED). Whatever each wait's outcome, replies stay in step.
  StoreClient setter(options_for(server->port()));
  for (int i = 0; i < 40; ++i) {
    std::string key = "race_" + std::to_string(i);
    auto later = std::async(std::launch::async, [&] {
      std::this_thread::sleep_for(std::chrono::microseconds(4000 + 100 * (i % 20)));
      setter.set(key, "v");
    });
    try {
      client.wait({key}, 5ms);
    } catch (const StoreTimeout&) {
    }
    later.get();
    EXPECT_EQ(client.add("race_counter", 1), i + 1);
    EXPECT_EQ(client.get(key, 1s), "v");
  }
  // Kept in step without reconnecting: still this client's and the setter's connections only.
  EXPECT_EQ(server->connection_count(), 2u);
}

TEST_F(StoreClientTest, OversizedKeyIsRefusedWithoutSendingAndTheConnectionStaysUsable) {
  std::string message = what_of([&] { client.set(std::string(9000, 'k'), "v"); });
  EXPECT_TRUE(contains(message, "over the limit")) << message;
  EXPECT_TRUE(contains(message, address)) << message;
  client.set("fine", "v");
  EXPECT_EQ(client.get("fine"), "v");
}

TEST_F(StoreClientTest, BinaryAndLargeValuesRoundTrip) {
  std::string binary("\0\x01\xff\0zero\0", 10);
  client.set("binary", binary);
  EXPECT_EQ(client.get("binary"), binary);
  std::string large(1024 * 1024, '\0');
  for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>((i * 131) % 251);
  client.set("large", large);
  EXPECT_EQ(client.get("large"), large);
  client.append("large", "tail");
  EXPECT_EQ(client.get("large"), large + "tail");
  EXPECT_EQ(client.multi_get({"binary", "large"}), (std::vector<std::string>{binary, large + "tail"}));
}

TEST_F(StoreClientTest, ManyThreadsEachWithItsOwnClient) {
  constexpr int kThreads = 32;
  constexpr int kOps = 200;
  std::vector<std::future<void>> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.push_back(std::async(std::launch::async, [&, t] {
      StoreClient own(options_for(server->port()));
      for (int i = 0; i < kOps / 2; ++i) {
        own.add("total", 1);
        std::string key = "t" + std::to_string(t) + "_" + std::to_string(i % 10);
        own.set(key, std::to_string(i));
        if (own.get(key) != std::to_string(i)) throw std::runtime_error("read back another value");
      }
      own.add("total", kOps / 2);  // the other half of the ops, in one
    }));
  }
  for (auto& thread : threads) thread.get();
  EXPECT_EQ(client.add("total", 0), kThreads * (kOps / 2 + kOps / 2));
  EXPECT_EQ(client.num_keys(), 1 + kThreads * 10);
}

TEST_F(StoreClientTest, SharedClientSerializesCallsFromThreads) {
  std::vector<std::future<void>> threads;
  for (int t = 0; t < 8; ++t) {
    threads.push_back(std::async(std::launch::async, [&] {
      for (int i = 0; i < 50; ++i) client.add("shared", 1);
    }));
  }
  for (auto& thread : threads) thread.get();
  EXPECT_EQ(client.add("shared", 0), 400);
}

TEST_F(StoreClientTest, ReconnectsWhenTheStoreDroppedTheIdleConnection) {
  client.set("before", "1");
  server->clear();  // drops every key and connection
  client.set("after", "2");
  EXPECT_EQ(client.get("after"), "2");
  EXPECT_FALSE(client.check({"before"}));
}

TEST_F(StoreClientTest, StopWhileBlockedInWaitEndsTheWaitWithAnError) {
  auto waiter = std::async(std::launch::async, [&] { return what_of([&] { client.wait({"never"}, 120s); }); });
  std::this_thread::sleep_for(200ms);
  server->stop();
  ASSERT_EQ(waiter.wait_for(kNoHang), std::future_status::ready) << "the client hung after the store stopped";
  std::string message = waiter.get();
  EXPECT_TRUE(contains(message, "store " + address + ": WAIT for \"/never\" failed")) << message;
}

TEST(StoreClient, ConnectRetriesUntilTheStoreListens) {
  int port = free_port();
  auto connected = std::async(std::launch::async, [&] {
    StoreClient client(options_for(port));
    client.set("k", "v");
    return client.get("k");
  });
  std::this_thread::sleep_for(300ms);
  auto server = start_server(std::nullopt, port);
  ASSERT_EQ(connected.wait_for(kNoHang), std::future_status::ready);
  EXPECT_EQ(connected.get(), "v");
}

TEST(StoreClient, UnreachableStoreNamesTheAddressWithinTheConnectTimeout) {
  int port = free_port();
  StoreClientOptions options = options_for(port);
  options.connect_timeout = 500ms;
  auto started = std::chrono::steady_clock::now();
  std::string message = what_of([&] { StoreClient client(options); });
  EXPECT_LT(std::chrono::steady_clock::now() - started, kNoHang);
  EXPECT_EQ(message, "cannot reach the store at 127.0.0.1:" + std::to_string(port) +
                         " within 500 ms: Connection refused");
}

TEST(StoreClient, UnresolvableHostIsNamed) {
  StoreClientOptions options = options_for(1);
  options.host = "no-such-host.invalid";
  options.connect_timeout = 200ms;
  std::string message = what_of([&] { StoreClient client(options); });
  EXPECT_TRUE(contains(message, "no-such-host.invalid")) << message;
}

TEST(StoreClient, HostNamesAreResolved) {
  auto server = start_server();
  StoreClientOptions options = options_for(server->port());
  options.host = "localhost";
  StoreClient client(options);
  client.set("k", "v");
  EXPECT_EQ(client.get("k"), "v");
}

TEST(StoreClient, Ipv6Loopback) {
  std::unique_ptr<StoreServer> server;
  try {
    server = start_server(std::nullopt, 0, "::1");
  } catch (const StoreError& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  StoreClientOptions options = options_for(server->port());
  options.host = "::1";
  StoreClient client(options);
  EXPECT_EQ(client.address(), "[::1]:" + std::to_string(server->port()));
  client.set("six", "v6");
  EXPECT_EQ(client.get("six"), "v6");
}

TEST(StoreClientAuth, RightTokenWorks) {
  auto server = start_server("s3cret");
  StoreClient client(options_for(server->port(), "s3cret"));
  client.set("k", "v");
  EXPECT_EQ(client.get("k"), "v");
  // A reconnect authenticates again.
  server->clear();
  client.set("k2", "v2");
  EXPECT_EQ(client.get("k2"), "v2");
}

TEST(StoreClientAuth, WrongTokenIsAClearError) {
  auto server = start_server("s3cret");
  std::string message = what_of([&] { StoreClient client(options_for(server->port(), "guess")); });
  EXPECT_TRUE(contains(message, "rejected the token")) << message;
  EXPECT_TRUE(contains(message, "127.0.0.1:" + std::to_string(server->port()))) << message;
}

TEST(StoreClientAuth, NoTokenAgainstATokenStoreIsAClearError) {
  auto server = start_server("s3cret");
  std::string message = what_of([&] { StoreClient client(options_for(server->port())); });
  EXPECT_TRUE(contains(message, "requires a token")) << message;
}

TEST(StoreClientAuth, TokenAgainstAStoreWithoutOneIsAClearError) {
  auto server = start_server();
  std::string message = what_of([&] { StoreClient client(options_for(server->port(), "s3cret")); });
  EXPECT_TRUE(contains(message, "refused to authenticate")) << message;
}

}  // namespace
}  // namespace ddprun::rendezvous

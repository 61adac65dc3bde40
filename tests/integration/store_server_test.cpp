// The store server against raw peers: bad requests close only their own connection, limits hold
// before allocation, silent connections are kept, both dialects share one key space.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "rendezvous/store_client.hpp"
#include "rendezvous/store_server.hpp"
#include "rendezvous/wire.hpp"
#include "raw_peer.hpp"

using namespace ddprun::rendezvous;
using ddprun::testing::RawPeer;
using namespace std::chrono_literals;

namespace {

wire::Request request(wire::Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  wire::Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return r;
}

struct Server {
  explicit Server(StoreServerOptions options = {}) : server((options.host = "127.0.0.1", options)) { server.start(); }
  StoreServer server;
  int port() const { return server.port(); }
  StoreClient client() { return StoreClient(StoreClientOptions{.host = "127.0.0.1", .port = port()}); }
};

}  // namespace

TEST(StoreServer, LegacyAndCurrentClientsShareOneKeySpace) {
  Server s;
  RawPeer legacy(s.port());
  legacy.send(wire::Dialect::legacy, request(wire::Op::set, {"/shared"}, {"from 1.13"}));
  auto client = s.client();
  EXPECT_EQ(client.get("shared"), "from 1.13");
  client.set("other", "from ddprun");
  legacy.send(wire::Dialect::legacy, request(wire::Op::get, {"/other"}));
  EXPECT_EQ(legacy.read_value(), "from ddprun");
}

TEST(StoreServer, TheQuotedBytesOfA113SetAreUnderstood) {
  Server s;
  RawPeer legacy(s.port());
  const unsigned char bytes[] = {0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0x2f, 0x66, 0x6f, 0x6f,
                                 0x03, 0,    0, 0, 0, 0, 0, 0, 0x62, 0x61, 0x72};
  legacy.send(std::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
  EXPECT_EQ(s.client().get("foo"), "bar");
}

TEST(StoreServer, OversizedKeyClosesOnlyThatConnection) {
  StoreServerOptions options;
  options.limits.max_key_bytes = 64;
  Server s(options);
  auto bystander = s.client();
  bystander.set("before", "1");
  RawPeer bad(s.port());
  // Only the length field: the server must refuse it before any body arrives.
  std::string header(1, '\0');
  wire::put_u64(header, 1ULL << 40);
  bad.send(header);
  EXPECT_TRUE(bad.closed_by_server());
  EXPECT_EQ(bystander.get("before"), "1");
  bystander.set("after", "2");
  EXPECT_EQ(bystander.get("after"), "2");
}

TEST(StoreServer, UnknownCodeClosesTheConnection) {
  Server s;
  RawPeer bad(s.port());
  bad.send(std::string(1, static_cast<char>(0x77)));
  EXPECT_TRUE(bad.closed_by_server());
  EXPECT_EQ(s.client().num_keys(), 0);
}

TEST(StoreServer, TooManyKeysInOneWaitIsRefused) {
  StoreServerOptions options;
  options.limits.max_keys_per_request = 4;
  Server s(options);
  RawPeer bad(s.port());
  bad.send(wire::Dialect::legacy, request(wire::Op::wait, {"/a", "/b", "/c", "/d", "/e"}));
  EXPECT_TRUE(bad.closed_by_server());
}

TEST(StoreServer, AbruptDisconnectInTheMiddleOfARequestHarmsNobody) {
  Server s;
  auto client = s.client();
  for (int i = 0; i < 50; ++i) {
    RawPeer half(s.port());
    std::string bytes = wire::encode_request(wire::Dialect::legacy, request(wire::Op::set, {"/k"}, {"value"}));
    half.send(std::string_view(bytes).substr(0, bytes.size() / 2));
  }  // each RawPeer closes its socket here, half a request sent
  client.set("still", "fine");
  EXPECT_EQ(client.get("still"), "fine");
  EXPECT_FALSE(client.check({"k"}));
  // The server forgot the dead connections.
  for (int i = 0; i < 200 && s.server.connection_count() > 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(s.server.connection_count(), 1U);
}

TEST(StoreServer, ConnectionsThatSendNothingAreKept) {
  Server s;
  RawPeer silent(s.port());
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(silent.closed_by_server(200ms));
  silent.send(wire::Dialect::legacy, request(wire::Op::add, {"init/"}, {}));
  EXPECT_EQ(silent.read_reply(wire::Op::add).number, 0);
}

TEST(StoreServer, MaxConnectionsRefusesTheExtraOnly) {
  StoreServerOptions options;
  options.max_connections = 2;
  Server s(options);
  RawPeer first(s.port());
  RawPeer second(s.port());
  for (int i = 0; i < 200 && s.server.connection_count() < 2; ++i) std::this_thread::sleep_for(5ms);
  RawPeer third(s.port());
  EXPECT_TRUE(third.closed_by_server());
  EXPECT_FALSE(first.closed_by_server(100ms));
}

TEST(StoreServer, WaitersGetAnErrorAtOnceOnShutdown) {
  auto server = std::make_unique<Server>();
  RawPeer waiter(server->port());
  waiter.send(wire::Dialect::legacy, request(wire::Op::wait, {"/never"}));
  std::this_thread::sleep_for(100ms);
  auto start = std::chrono::steady_clock::now();
  server->server.stop();
  EXPECT_TRUE(waiter.closed_by_server(2s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(StoreServer, ClearGivesAFreshKeySpace) {
  Server s;
  auto client = s.client();
  client.set("old", "x");
  client.ping();  // a round trip: the SET before it has been applied
  EXPECT_EQ(s.server.key_count(), 1U);
  s.server.clear();
  EXPECT_EQ(s.server.key_count(), 0U);
  EXPECT_FALSE(s.client().check({"old"}));
}

TEST(StoreServer, ManyConcurrentClientsCountCorrectly) {
  Server s;
  constexpr int kThreads = 16;
  constexpr int kAdds = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto client = s.client();
      for (int i = 0; i < kAdds; ++i) client.add("counter", 1);
      client.add("done", 1);
    });
  }
  auto waiter = s.client();
  waiter.wait({"done"});
  for (auto& t : threads) t.join();
  EXPECT_EQ(waiter.add("counter", 0), kThreads * kAdds);
}

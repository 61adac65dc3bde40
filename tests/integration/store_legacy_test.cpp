// StoreClient's legacy_fallback against the real thing: PyTorch 1.13's TCPStore server (Debian's
// python3-torch, the store torchrun 1.13 gives its workers), which resets a connection that starts
// with VALIDATE. With the fallback the client speaks 1.13's dialect and meets a Python client's keys;
// without it the failure names the handshake; against ddprun's own store it stays in the current
// dialect. Skipped, with the reason, where /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "rendezvous/store_client.hpp"
#include "rendezvous/store_error.hpp"
#include "rendezvous/store_server.hpp"
#include "torch_store_server.hpp"

namespace ddprun::rendezvous {
namespace {

using namespace std::chrono_literals;

StoreClientOptions options_for(int port, bool legacy_fallback) {
  StoreClientOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.connect_timeout = 5s;
  options.timeout = 20s;
  options.legacy_fallback = legacy_fallback;
  return options;
}

TEST(StoreLegacy, FallbackSpeaksPyTorch113Dialect) {
  START_TORCH_STORE(server);
  StoreClient client(options_for(server.port(), true));
  EXPECT_EQ(client.dialect(), wire::Dialect::legacy);

  // Keys meet a Python 1.13 client's, both ways.
  client.set("ddprun-set", "hello");
  EXPECT_EQ(server.python_get("ddprun-set"), "hello");
  EXPECT_EQ(client.get("from-python"), "42");

  EXPECT_EQ(client.add("counter", 5), 5);
  EXPECT_EQ(client.add("counter", 2), 7);
  EXPECT_TRUE(client.check({"counter", "ddprun-set"}));
  EXPECT_FALSE(client.check({"missing"}));
  client.multi_set({"a", "b"}, {"1", "2"});  // key by key: 1.13 has no MULTI_SET
  EXPECT_EQ(client.multi_get({"a", "b"}), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(client.compare_set("a", "1", "3"), "3");
  EXPECT_TRUE(client.delete_key("b"));
  EXPECT_FALSE(client.check({"b"}));
}

TEST(StoreLegacy, TimedOutWaitClosesTheConnectionAndTheNextCallReconnects) {
  START_TORCH_STORE(server);
  StoreClient client(options_for(server.port(), true));
  auto started = std::chrono::steady_clock::now();
  EXPECT_THROW(client.wait({"never"}, 300ms), StoreTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);  // no hang on a CANCEL_WAIT 1.13 lacks
  client.set("after", "ok");
  EXPECT_EQ(client.get("after"), "ok");
  EXPECT_EQ(client.dialect(), wire::Dialect::legacy);
}

TEST(StoreLegacy, OpsOutsideTheDialectAreClearErrors) {
  START_TORCH_STORE(server);
  StoreClient client(options_for(server.port(), true));
  try {
    client.ping();
    FAIL() << "PING succeeded against a 1.13 store";
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find("PyTorch 1.13"), std::string::npos) << error.what();
  }
  client.set("still", "usable");
  EXPECT_EQ(client.get("still"), "usable");
}

TEST(StoreLegacy, WithoutFallbackTheFailureNamesTheHandshake) {
  START_TORCH_STORE(server);
  StoreClientOptions options = options_for(server.port(), false);
  options.connect_timeout = 500ms;
  try {
    StoreClient client(options);
    FAIL() << "connected to a 1.13 store in the current dialect";
  } catch (const StoreError& error) {
    EXPECT_NE(std::string(error.what()).find("handshake"), std::string::npos) << error.what();
  }
}

TEST(StoreLegacy, FallbackKeepsTheCurrentDialectWithDdprunsStore) {
  StoreServerOptions server_options;
  server_options.host = "127.0.0.1";
  server_options.port = 0;
  StoreServer server(server_options);
  server.start();
  StoreClient client(options_for(server.port(), true));
  EXPECT_EQ(client.dialect(), wire::Dialect::current);
  client.ping();
  client.set("k", "v");
  EXPECT_EQ(client.get("k"), "v");
}

}  // namespace
}  // namespace ddprun::rendezvous

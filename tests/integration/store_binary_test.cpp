// The ddprun-store binary: serves on the port it writes to --port-file, requires the token when
// given one, and stops gracefully on SIGTERM, releasing its waiting clients at once.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <thread>

#include "harness.hpp"
#include "rendezvous/store_client.hpp"
#include "rendezvous/store_error.hpp"

using namespace ddprun::testing;
using namespace ddprun::rendezvous;
using namespace std::chrono_literals;

namespace {

int wait_for_port(const TempDir& dir) {
  auto file = dir.path() / "port";
  EXPECT_TRUE(eventually([&] { return std::filesystem::exists(file); })) << "no port file";
  return std::stoi(read_file(file));
}

StoreClientOptions client_options(int port) {
  return StoreClientOptions{.host = "127.0.0.1", .port = port, .connect_timeout = 5s, .timeout = 30s};
}

}  // namespace

TEST(StoreBinary, ServesAndStopsGracefullyOnSigterm) {
  TempDir dir;
  Launch store(Launch::Command{{ddprun_store_binary(), "--host", "127.0.0.1", "--port", "0", "--port-file",
                                (dir.path() / "port").string()}});
  int port = wait_for_port(dir);
  StoreClient client(client_options(port));
  client.set("k", "v");
  EXPECT_EQ(client.get("k"), "v");

  std::thread waiter([&] {
    StoreClient blocked(client_options(port));
    EXPECT_THROW(blocked.wait({"never"}, 60s), StoreError);
  });
  std::this_thread::sleep_for(200ms);
  auto start = std::chrono::steady_clock::now();
  store.send(SIGTERM);
  Outcome outcome = store.wait(10s);
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "the waiting client held the store up";
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
}

TEST(StoreBinary, TokenFileRequiresAuthentication) {
  TempDir dir;
  std::ofstream(dir.path() / "token") << "s3cret\n";
  Launch store(Launch::Command{{ddprun_store_binary(), "--host", "127.0.0.1", "--port", "0", "--port-file",
                                (dir.path() / "port").string(), "--token-file", (dir.path() / "token").string()}});
  int port = wait_for_port(dir);
  auto with_token = client_options(port);
  with_token.token = "s3cret";
  StoreClient good(with_token);
  good.set("k", "v");
  EXPECT_EQ(good.get("k"), "v");
  auto wrong = client_options(port);
  wrong.token = "guess";
  EXPECT_THROW(StoreClient{wrong}, StoreError);
  store.send(SIGTERM);
  EXPECT_EQ(store.wait(10s).exit_status, 0);
}

TEST(StoreBinary, BadFlagsAreUsageErrors) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--port", "70000"}, {"--frobnicate"},
                                        {"--token-file", "/nonexistent/token"}}) {
    args.insert(args.begin(), ddprun_store_binary());
    Outcome outcome = run_ddprun_via(args);
    EXPECT_EQ(outcome.exit_status, 2) << args[1] << ": " << outcome.err;
    EXPECT_EQ(split_lines(outcome.err).size(), 1U) << outcome.err;
  }
}

TEST(StoreBinary, BusyPortIsAClearError) {
  TempDir dir;
  Launch first(Launch::Command{{ddprun_store_binary(), "--host", "127.0.0.1", "--port", "0", "--port-file",
                                (dir.path() / "port").string()}});
  int port = wait_for_port(dir);
  Outcome second = run_ddprun_via({ddprun_store_binary(), "--host", "127.0.0.1", "--port", std::to_string(port)});
  EXPECT_EQ(second.exit_status, 1);
  EXPECT_NE(second.err.find(std::to_string(port)), std::string::npos) << second.err;
  first.send(SIGTERM);
  first.wait(10s);
}

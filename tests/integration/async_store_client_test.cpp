// AsyncStoreClient on a shared io_context: every operation against the real StoreServer; two clients
// on one loop, one blocked in a long WAIT while the other works (nothing blocks the loop); the
// deadline of every kind of operation against a store that answers nothing; cancel() during a
// connect retry and during a WAIT; destroying a client with an operation pending; one operation at
// a time; the legacy fallback against PyTorch 1.13's own store.
#include <gtest/gtest.h>

#include "rendezvous/async_store_client.hpp"  // first: store.hpp includes <utility> before Asio

#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/store_error.hpp"
#include "rendezvous/store_server.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/loopback_store.hpp"
#include "tests/support/spawn_task.hpp"
#include "torch_store_server.hpp"

namespace ddprun::rendezvous {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ddprun::testing::free_port;
using ddprun::testing::run_until;
using ddprun::testing::spawn;
using ddprun::testing::start_loopback_store;
using namespace std::chrono_literals;

/// Generous bound on anything that must not hang; never a timing assertion.
constexpr auto kNoHang = 20s;

StoreClientOptions options_for(int port) {
  StoreClientOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.connect_timeout = 10s;
  options.timeout = 30s;
  return options;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Runs `task` on `io` until it completes (other work on the loop runs meanwhile) and returns its
/// result, rethrowing what it threw. Fails the test instead of hanging.
template <class T>
T run(asio::io_context& io, Task<T> task) {
  return ddprun::testing::run_to_completion(io, std::move(task), kNoHang);
}

/// Calls `action` on the loop `delay` from now, unless the returned timer is gone by then.
std::unique_ptr<asio::steady_timer> after(asio::io_context& io, Clock::duration delay, std::function<void()> action) {
  auto timer = std::make_unique<asio::steady_timer>(io, delay);
  timer->async_wait([action = std::move(action)](const boost::system::error_code& ec) {
    if (!ec) action();
  });
  return timer;
}

/// What `task` threw ("(no exception)" when it did not).
template <class T>
std::string what_of(asio::io_context& io, Task<T> task) {
  try {
    run(io, std::move(task));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

/// A TCP server on a thread of its own that accepts every connection and then answers nothing, or
/// only the handshake (VALIDATE + PING, then the GETNUMKEYS probe) and nothing after it. It never
/// reads past the handshake, so a large request fills the socket buffers and its sending blocks.
class MuteServer {
 public:
  enum class Mode { silent, handshake_only };

  explicit MuteServer(Mode mode) : mode_(mode), acceptor_(io_) {
    acceptor_.open(tcp::v4());
    // A small receive buffer (accepted sockets inherit it; it also stops autotuning), so that a
    // request of a few MiB that nobody reads fills it and the sending blocks.
    acceptor_.set_option(asio::socket_base::receive_buffer_size(64 * 1024));
    acceptor_.bind(tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    acceptor_.listen();
    asio::co_spawn(io_, serve(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~MuteServer() {
    io_.stop();
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  int accepted() const { return accepted_.load(); }

 private:
  Task<void> serve() {
    for (;;) {
      tcp::socket socket = co_await acceptor_.async_accept(asio::use_awaitable);
      ++accepted_;
      if (mode_ == Mode::handshake_only) {
        try {
          std::array<char, 10> hello{};  // VALIDATE (1 + 4 bytes) and PING (1 + 4 bytes)
          co_await asio::async_read(socket, asio::buffer(hello), asio::use_awaitable);
          co_await asio::async_write(socket, asio::buffer(hello.data() + 6, 4), asio::use_awaitable);
          std::array<char, 1> probe{};  // GETNUMKEYS
          co_await asio::async_read(socket, asio::buffer(probe), asio::use_awaitable);
          std::array<char, 8> zero{};
          co_await asio::async_write(socket, asio::buffer(zero), asio::use_awaitable);
        } catch (const std::exception&) {
          continue;
        }
      }
      held_.push_back(std::move(socket));
    }
  }

  const Mode mode_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::vector<tcp::socket> held_;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

/// Counts the ticks of a 10 ms timer on the loop while it lives: a blocked loop does not tick.
class Ticker {
 public:
  explicit Ticker(asio::io_context& io) : timer_(io) { arm(); }
  ~Ticker() {
    *alive_ = false;
    timer_.cancel();
  }
  int ticks() const { return ticks_; }

 private:
  void arm() {
    timer_.expires_after(10ms);
    timer_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
      if (ec || !*alive) return;
      ++ticks_;
      arm();
    });
  }
  asio::steady_timer timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  int ticks_ = 0;
};

class AsyncStoreClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<StoreServer> server = start_loopback_store();
  asio::io_context io;
  AsyncStoreClient client{io.get_executor(), options_for(server->port())};
  std::string address = "127.0.0.1:" + std::to_string(server->port());
};

TEST_F(AsyncStoreClientTest, EveryOperation) {
  EXPECT_EQ(client.address(), address);
  run(io, client.connect());
  run(io, client.set("alpha", "one"));
  EXPECT_EQ(run(io, client.get("alpha", 1s)), "one");
  EXPECT_EQ(run(io, client.add("counter", 5)), 5);
  EXPECT_EQ(run(io, client.add("counter", -7)), -2);
  EXPECT_EQ(run(io, client.compare_set("cas", "", "first")), "first");
  EXPECT_EQ(run(io, client.compare_set("cas", "other", "second")), "first");
  EXPECT_EQ(run(io, client.compare_set("missing", "x", "y")), "x");
  EXPECT_TRUE(run(io, client.check({"alpha", "cas"})));
  EXPECT_FALSE(run(io, client.check({"alpha", "missing"})));
  run(io, client.wait({"alpha", "counter"}, 1s));
  run(io, client.multi_set({"k1", "k2"}, {"v1", std::string("\0v2", 3)}));
  EXPECT_EQ(run(io, client.multi_get({"k2", "k1"}, 1s)), (std::vector<std::string>{std::string("\0v2", 3), "v1"}));
  EXPECT_EQ(run(io, client.num_keys()), 5);
  EXPECT_TRUE(run(io, client.delete_key("k1")));
  EXPECT_FALSE(run(io, client.delete_key("k1")));
  run(io, client.append("log", "x"));
  run(io, client.append("log", "yz"));
  EXPECT_EQ(run(io, client.get("log", 1s)), "xyz");
  run(io, client.queue_push("q", "first"));
  run(io, client.queue_push("q", "second"));
  EXPECT_EQ(run(io, client.queue_len("q")), 2);
  EXPECT_EQ(run(io, client.queue_pop("q", 1s)), "first");
  EXPECT_EQ(run(io, client.queue_pop("q", 1s)), "second");
  run(io, client.ping());
  EXPECT_EQ(client.dialect(), wire::Dialect::current);
  EXPECT_THROW(run(io, client.multi_set({"a"}, {})), std::invalid_argument);
}

TEST_F(AsyncStoreClientTest, WorksThroughTheStoreInterface) {
  Store& store = client;
  run(io, store.set("through", "interface"));
  EXPECT_EQ(run(io, store.get("through", 1s)), "interface");
  EXPECT_EQ(run(io, store.multi_get({"through"}, 1s)), std::vector<std::string>{"interface"});
}

TEST_F(AsyncStoreClientTest, TwoClientsOnOneLoopOneBlockedInAWaitTheOtherWorking) {
  AsyncStoreClient setter(io.get_executor(), options_for(server->port()));
  Ticker ticker(io);
  std::vector<std::string> events;
  // (Named lambdas: a coroutine lambda's captures live in the lambda, which must outlive it.)
  auto wait_for_go = [&]() -> Task<void> {
    // (A braced list inside a co_await expression trips g++ 12: "array used as initializer".)
    const std::vector<std::string> keys = {"go"};
    co_await client.wait(keys, kNoHang);
    events.push_back("woken");
  };
  auto work_then_set_go = [&]() -> Task<void> {
    for (int i = 0; i < 50; ++i) co_await setter.add("n", 1);
    events.push_back("added 50 while the other waited");
    asio::steady_timer pause(io, 200ms);
    co_await pause.async_wait(asio::use_awaitable);
    co_await setter.set("go", "1");
    events.push_back("set go");
  };
  auto waiter = spawn(io, wait_for_go());
  auto working = spawn(io, work_then_set_go());
  ASSERT_TRUE(run_until(io, [&] { return waiter->done && working->done; }, kNoHang));
  EXPECT_EQ(waiter->error_message(), "") << "the waiter failed";
  EXPECT_EQ(working->error_message(), "") << "the setter failed";
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0], "added 50 while the other waited");
  EXPECT_EQ(run(io, client.add("n", 0)), 50);
  EXPECT_GE(ticker.ticks(), 10) << "the loop did not tick while one client waited";
}

TEST_F(AsyncStoreClientTest, ASecondCallWhileOneIsPendingIsALogicError) {
  auto first = spawn(io, client.wait({"never"}, 300ms));
  auto set_meanwhile = [&]() -> Task<void> {
    asio::steady_timer pause(io, 50ms);
    co_await pause.async_wait(asio::use_awaitable);
    co_await client.set("k", "v");
  };
  auto second = spawn(io, set_meanwhile());
  ASSERT_TRUE(run_until(io, [&] { return first->done && second->done; }, kNoHang));
  EXPECT_THROW(second->get(), std::logic_error);
  EXPECT_TRUE(contains(second->error_message(), "one operation at a time")) << second->error_message();
  run(io, client.set("k", "v"));  // the client is fine afterwards
  EXPECT_EQ(run(io, client.get("k", 1s)), "v");
}

TEST_F(AsyncStoreClientTest, WaitTimeoutKeepsTheConnectionInStep) {
  std::string message = what_of(io, client.wait({"rank_3_ready"}, 200ms));
  EXPECT_EQ(message, "store " + address + ": WAIT for \"/rank_3_ready\" timed out after 200 ms");
  run(io, client.set("rank_3_ready", "1"));
  EXPECT_EQ(run(io, client.add("n", 1)), 1);
  run(io, client.wait({"rank_3_ready"}, 1s));
  EXPECT_EQ(server->connection_count(), 1u) << "the client reconnected";
}

TEST_F(AsyncStoreClientTest, IdleClientLeavesNoWorkOnTheLoop) {
  run(io, client.set("k", "v"));
  io.restart();
  const auto started = Clock::now();
  io.run();  // returns at once: no deadline timer is left armed by the finished call
  EXPECT_LT(Clock::now() - started, 5s);
}

TEST_F(AsyncStoreClientTest, CancelDuringAWaitEndsItAtOnceAndEveryLaterCall) {
  auto waiting = spawn(io, client.wait({"never"}, 120s));
  auto cancel = after(io, 200ms, [&] { client.cancel(); });
  const auto started = Clock::now();
  ASSERT_TRUE(run_until(io, [&] { return waiting->done; }, kNoHang));
  EXPECT_LT(Clock::now() - started, 10s);
  EXPECT_THROW(waiting->get(), StoreError);
  EXPECT_EQ(waiting->error_message(), "store " + address + ": WAIT for \"/never\" failed: interrupted");
  EXPECT_EQ(what_of(io, client.set("k", "v")), "store " + address + ": interrupted");
}

TEST_F(AsyncStoreClientTest, DestroyingTheClientWithAnOperationPendingEndsIt) {
  auto doomed = std::make_unique<AsyncStoreClient>(io.get_executor(), options_for(server->port()));
  auto waiting = spawn(io, doomed->wait({"never"}, 120s));
  auto destroy = after(io, 200ms, [&] { doomed.reset(); });
  ASSERT_TRUE(run_until(io, [&] { return waiting->done; }, kNoHang));
  EXPECT_THROW(waiting->get(), StoreError);
  EXPECT_TRUE(contains(waiting->error_message(), "interrupted")) << waiting->error_message();
}

TEST(AsyncStoreClient, CancelDuringTheConnectRetry) {
  asio::io_context io;
  int port = free_port();
  StoreClientOptions options = options_for(port);
  options.connect_timeout = 60s;
  AsyncStoreClient client(io.get_executor(), options);
  auto setting = spawn(io, client.set("k", "v"));
  auto cancel = after(io, 300ms, [&] { client.cancel(); });
  const auto started = Clock::now();
  ASSERT_TRUE(run_until(io, [&] { return setting->done; }, kNoHang));
  EXPECT_LT(Clock::now() - started, 10s) << "the retry went on after cancel()";
  EXPECT_THROW(setting->get(), StoreError);
  EXPECT_EQ(setting->error_message(), "store 127.0.0.1:" + std::to_string(port) + ": interrupted");
}

TEST(AsyncStoreClient, ConnectRetriesUntilTheStoreListensWithoutBlockingTheLoop) {
  asio::io_context io;
  int port = free_port();
  AsyncStoreClient client(io.get_executor(), options_for(port));
  Ticker ticker(io);
  std::unique_ptr<StoreServer> server;
  asio::steady_timer later(io, 300ms);
  later.async_wait([&](const boost::system::error_code&) {
    StoreServerOptions server_options;
    server_options.host = "127.0.0.1";
    server_options.port = port;
    server = std::make_unique<StoreServer>(server_options);
    server->start();
  });
  run(io, client.set("k", "v"));
  EXPECT_EQ(run(io, client.get("k", 1s)), "v");
  EXPECT_GE(ticker.ticks(), 10);
}

TEST(AsyncStoreClient, UnreachableStoreNamesTheAddressWithinTheConnectTimeout) {
  asio::io_context io;
  int port = free_port();
  StoreClientOptions options = options_for(port);
  options.connect_timeout = 500ms;
  AsyncStoreClient client(io.get_executor(), options);
  EXPECT_EQ(what_of(io, client.connect()),
            "cannot reach the store at 127.0.0.1:" + std::to_string(port) + " within 500 ms: Connection refused");
}

TEST(AsyncStoreClient, HostNamesAreResolvedOffTheLoop) {
  auto server = start_loopback_store();
  asio::io_context io;
  StoreClientOptions options = options_for(server->port());
  options.host = "localhost";
  AsyncStoreClient client(io.get_executor(), options);
  run(io, client.set("k", "v"));
  EXPECT_EQ(run(io, client.get("k", 1s)), "v");
}

TEST(AsyncStoreClient, TokenAuthentication) {
  auto server = start_loopback_store("s3cret");
  asio::io_context io;
  StoreClientOptions options = options_for(server->port());
  options.token = "s3cret";
  AsyncStoreClient good(io.get_executor(), options);
  run(io, good.set("k", "v"));
  EXPECT_EQ(run(io, good.get("k", 1s)), "v");
  options.token = "guess";
  AsyncStoreClient wrong(io.get_executor(), options);
  EXPECT_TRUE(contains(what_of(io, wrong.connect()), "rejected the token"));
  options.token.reset();
  AsyncStoreClient none(io.get_executor(), options);
  EXPECT_TRUE(contains(what_of(io, none.connect()), "requires a token"));
}

// ------------------------------------------------------------------------ deadlines, mute store

/// A client of `store` with short timeouts, and a ticker proving the loop runs while it waits.
struct MuteFixture {
  explicit MuteFixture(const MuteServer& store) : address("127.0.0.1:" + std::to_string(store.port())) {
    StoreClientOptions options = options_for(store.port());
    options.connect_timeout = 400ms;
    options.timeout = 300ms;
    client.emplace(io.get_executor(), options);
  }
  /// What `task` threw, checking that it ended soon and the loop ticked meanwhile.
  template <class T>
  std::string outcome(Task<T> task) {
    Ticker ticker(io);
    const auto started = Clock::now();
    std::string message = what_of(io, std::move(task));
    EXPECT_LT(Clock::now() - started, 5s) << message;
    EXPECT_GE(ticker.ticks(), 5) << message;
    return message;
  }

  asio::io_context io;
  std::string address;
  std::optional<AsyncStoreClient> client;
};

TEST(AsyncStoreClientDeadline, ConnectToAStoreThatNeverAnswers) {
  MuteServer store(MuteServer::Mode::silent);
  MuteFixture f(store);
  std::string message = f.outcome(f.client->connect());
  EXPECT_EQ(message, "cannot reach the store at " + f.address + " within 400 ms: timed out after 400 ms (in the handshake)");
}

TEST(AsyncStoreClientDeadline, EveryOperationWithAReply) {
  MuteServer store(MuteServer::Mode::handshake_only);
  MuteFixture f(store);
  AsyncStoreClient& c = *f.client;
  const std::string at = "store " + f.address + ": ";
  const std::string cancel_too = "; then CANCEL_WAIT timed out after 300 ms";
  EXPECT_EQ(f.outcome(c.add("k", 1)), at + "ADD for \"/k\" timed out after 300 ms");
  EXPECT_EQ(f.outcome(c.compare_set("k", "a", "b")), at + "COMPARE_SET for \"/k\" timed out after 300 ms");
  EXPECT_EQ(f.outcome(c.check({"k"})), at + "CHECK for \"/k\" timed out after 300 ms");
  EXPECT_EQ(f.outcome(c.num_keys()), at + "GETNUMKEYS timed out after 300 ms");
  EXPECT_EQ(f.outcome(c.delete_key("k")), at + "DELETE_KEY for \"/k\" timed out after 300 ms");
  EXPECT_EQ(f.outcome(c.queue_len("k")), at + "QUEUE_LEN for \"/k\" timed out after 300 ms");
  EXPECT_EQ(f.outcome(c.ping()), at + "PING timed out after 300 ms");
  EXPECT_EQ(f.outcome(c.wait({"k"}, 200ms)), at + "WAIT for \"/k\" timed out after 200 ms" + cancel_too);
  EXPECT_EQ(f.outcome(c.get("k", 200ms)),
            at + "GET for \"/k\" timed out after 200 ms waiting for the key to be set" + cancel_too);
  EXPECT_EQ(f.outcome(c.multi_get({"k"}, 200ms)),
            at + "MULTI_GET for \"/k\" timed out after 200 ms waiting for the keys to be set" + cancel_too);
  EXPECT_EQ(f.outcome(c.queue_pop("k", 200ms)),
            at + "QUEUE_POP for \"/k\" timed out after 200 ms waiting for an item" + cancel_too);
  // Each timeout closed its connection (its state was unknown), and each next call connected anew.
  EXPECT_EQ(store.accepted(), 11);
}

TEST(AsyncStoreClientDeadline, EveryOperationWithoutAReplyWhileSending) {
  MuteServer store(MuteServer::Mode::handshake_only);
  MuteFixture f(store);
  AsyncStoreClient& c = *f.client;
  const std::string at = "store " + f.address + ": ";
  const std::string big(8 << 20, 'x');  // more than the socket buffers of both ends hold
  EXPECT_EQ(f.outcome(c.set("k", big)), at + "SET for \"/k\" timed out after 300 ms (sending)");
  EXPECT_EQ(f.outcome(c.append("k", big)), at + "APPEND for \"/k\" timed out after 300 ms (sending)");
  EXPECT_EQ(f.outcome(c.multi_set({"k"}, {big})), at + "MULTI_SET for \"/k\" timed out after 300 ms (sending)");
  EXPECT_EQ(f.outcome(c.queue_push("k", big)), at + "QUEUE_PUSH for \"/k\" timed out after 300 ms (sending)");
}

// ------------------------------------------------------------------------------ legacy dialect

TEST(AsyncStoreClientLegacy, FallbackSpeaksPyTorch113Dialect) {
  START_TORCH_STORE(server);
  asio::io_context io;
  StoreClientOptions options = options_for(server.port());
  options.connect_timeout = 5s;
  options.legacy_fallback = true;
  AsyncStoreClient client(io.get_executor(), options);
  run(io, client.set("ddprun-set", "hello"));
  EXPECT_EQ(client.dialect(), wire::Dialect::legacy);
  EXPECT_EQ(server.python_get("ddprun-set"), "hello");
  EXPECT_EQ(run(io, client.get("from-python", 5s)), "42");
  EXPECT_EQ(run(io, client.add("counter", 5)), 5);
  run(io, client.multi_set({"a", "b"}, {"1", "2"}));
  EXPECT_EQ(run(io, client.multi_get({"a", "b"}, 5s)), (std::vector<std::string>{"1", "2"}));
  EXPECT_TRUE(contains(what_of(io, client.ping()), "PyTorch 1.13"));
  // A timed-out wait closes the connection (1.13 has no CANCEL_WAIT); the next call reconnects.
  EXPECT_THROW(run(io, client.wait({"never"}, 300ms)), StoreTimeout);
  EXPECT_EQ(run(io, client.compare_set("a", "1", "3")), "3");
  EXPECT_EQ(client.dialect(), wire::Dialect::legacy);
}

TEST(AsyncStoreClientLegacy, WithoutFallbackTheFailureNamesTheHandshake) {
  START_TORCH_STORE(server);
  asio::io_context io;
  StoreClientOptions options = options_for(server.port());
  options.connect_timeout = 500ms;
  AsyncStoreClient client(io.get_executor(), options);
  EXPECT_TRUE(contains(what_of(io, client.connect()), "handshake"));
}

}  // namespace
}  // namespace ddprun::rendezvous

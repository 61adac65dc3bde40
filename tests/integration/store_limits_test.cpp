// What one hostile or broken peer can make the store hold: the ddprun-store binary under attacks
// that once crashed it or grew it without bound, its memory read from /proc/PID/status while the
// attack runs. Each attack must cost its own connection (or make it wait), never the store: a fresh
// client is served afterwards. The store runs with its address space capped, so that a store that
// tries to allocate gigabytes dies quickly instead of taking the machine.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <thread>

#include "harness.hpp"
#include "raw_peer.hpp"
#include "rendezvous/key_space.hpp"
#include "rendezvous/store_client.hpp"
#include "rendezvous/wire.hpp"

using namespace ddprun::testing;
using namespace ddprun::rendezvous;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kMiB = 1 << 20;
constexpr std::size_t kValueBytes = 8 * kMiB;  // the default --max-value-bytes
/// What the store may hold while attacked: 64 MiB for itself and its buffers, plus the largest
/// value the limits let the test store.
constexpr long kCeilingKib = static_cast<long>((64 * kMiB + kValueBytes) / 1024);
/// The store's address space cap: far above the ceiling, far below what the attacks once took.
constexpr long kAddressSpaceKib = 1024 * 1024;

/// A ddprun-store process on 127.0.0.1 with a port file, without any token from the environment.
/// Its VmRSS is sampled every 5 ms for as long as it runs: VmHWM alone can miss a peak (the kernel
/// updates it lazily when memory is freed).
class StoreProcess {
 public:
  explicit StoreProcess(std::vector<std::string> flags = {})
      : launch_(command(dir_, std::move(flags)), {}, {"DDPRUN_STORE_TOKEN", "DDPRUN_STORE_TOKEN_FILE"}) {
    auto file = dir_.path() / "port";
    EXPECT_TRUE(eventually([&] { return std::filesystem::exists(file); })) << "no port file";
    port_ = std::stoi(read_file(file));
    sampler_ = std::thread([this] {
      while (sampling_) {
        sampled_peak_kib_ = std::max(sampled_peak_kib_.load(), status_kib("VmRSS"));
        std::this_thread::sleep_for(5ms);
      }
    });
  }
  ~StoreProcess() {
    sampling_ = false;
    sampler_.join();
  }
  StoreProcess(const StoreProcess&) = delete;
  StoreProcess& operator=(const StoreProcess&) = delete;

  int port() const { return port_; }
  const TempDir& dir() const { return dir_; }

  /// A field of /proc/PID/status in kB (VmRSS, VmHWM), or -1 once the process is gone.
  long status_kib(const std::string& field) const {
    std::ifstream in("/proc/" + std::to_string(launch_.pid()) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("State:", 0) == 0 && line.find('Z') != std::string::npos) return -1;
      if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
    }
    return -1;
  }
  bool alive() const { return status_kib("VmRSS") >= 0; }
  /// The most memory the store has held so far, in KiB.
  long peak_kib() const { return std::max({sampled_peak_kib_.load(), status_kib("VmHWM"), status_kib("VmRSS")}); }

  StoreClient client(std::optional<std::string> token = std::nullopt) const {
    StoreClientOptions options;
    options.host = "127.0.0.1";
    options.port = port_;
    options.connect_timeout = 5s;
    options.timeout = 30s;
    options.token = std::move(token);
    return StoreClient(options);
  }

  /// A round trip on a fresh connection: the store is alive and serving, and has run everything it
  /// had read before this (one thread serves every connection in order).
  void expect_serves_a_fresh_client(std::optional<std::string> token = std::nullopt) const {
    ASSERT_TRUE(alive()) << "the store died";
    auto fresh = client(std::move(token));
    fresh.set("fresh", "yes");
    EXPECT_EQ(fresh.get("fresh"), "yes");
  }

 private:
  static Launch::Command command(const TempDir& dir, std::vector<std::string> flags) {
    std::vector<std::string> argv{"/bin/sh", "-c", "ulimit -v " + std::to_string(kAddressSpaceKib) + " && exec \"$0\" \"$@\"",
                                  ddprun_store_binary(), "--host", "127.0.0.1", "--port", "0", "--port-file",
                                  (dir.path() / "port").string()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return Launch::Command{argv};
  }

  TempDir dir_;
  Launch launch_;
  int port_ = 0;
  std::atomic<bool> sampling_{true};
  std::atomic<long> sampled_peak_kib_{-1};
  std::thread sampler_;
};

wire::Request request(wire::Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  wire::Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return r;
}

std::string legacy(wire::Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  return wire::encode_request(wire::Dialect::legacy, request(op, std::move(keys), std::move(values)));
}

std::string current(wire::Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  return wire::encode_request(wire::Dialect::current, request(op, std::move(keys), std::move(values)));
}

/// Sets `key` to `value` from a connection of its own, and waits until the store has it.
void set_value(const StoreProcess& store, const std::string& key, const std::string& value) {
  RawPeer setter(store.port());
  setter.send(legacy(wire::Op::set, {key}, {value}) + legacy(wire::Op::num_keys));
  setter.read_reply(wire::Op::num_keys);
}

}  // namespace

// The defect 2: a 4.8 KB request asked for a 3.2 GB reply, and std::bad_alloc ended the
// store (and the agent it runs in). The reply's size is now known before it is built.
TEST(StoreLimits, MultiGetAmplificationClosesOnlyThatConnection) {
  StoreProcess store;
  set_value(store, "/big", std::string(kValueBytes, 'v'));
  RawPeer attacker(store.port());
  attacker.send(legacy(wire::Op::multi_get, std::vector<std::string>(400, "/big")));
  EXPECT_TRUE(attacker.closed_by_server());
  store.expect_serves_a_fresh_client();
  EXPECT_LT(store.peak_kib(), kCeilingKib);

  RawPeer modest(store.port());  // a MULTI_GET whose reply fits is still served
  modest.send(legacy(wire::Op::multi_get, {"/big", "/fresh"}));
  wire::Reply both = modest.read_reply(wire::Op::multi_get, 2);
  EXPECT_EQ(both.values.at(0).size(), kValueBytes);
  EXPECT_EQ(both.values.at(1), "yes");
}

// Defect 3: pipelined GETs of an 8 MiB value, replies never read, grew the store by 8 MiB each.
// Now the connection is not read while the next reply does not fit; when its client reads, every
// reply arrives, whole and in order.
TEST(StoreLimits, UnreadPipelinedGetsWaitInsteadOfGrowingTheStore) {
  StoreProcess store;
  set_value(store, "/a", std::string(kValueBytes, 'a'));
  set_value(store, "/b", std::string(kValueBytes, 'b'));
  constexpr int kGets = 16;  // 128 MiB of replies
  std::string gets;
  for (int i = 0; i < kGets; ++i) gets += legacy(wire::Op::get, {i % 2 == 0 ? "/a" : "/b"});
  RawPeer reader(store.port());
  reader.send(gets);
  std::this_thread::sleep_for(300ms);  // the store has read the GETs
  store.expect_serves_a_fresh_client();
  EXPECT_LT(store.peak_kib(), kCeilingKib);

  for (int i = 0; i < kGets; ++i) {
    std::string value = reader.read_value();
    ASSERT_EQ(value.size(), kValueBytes) << "reply " << i;
    EXPECT_EQ(value.front(), i % 2 == 0 ? 'a' : 'b') << "reply " << i;
    EXPECT_EQ(value.back(), value.front()) << "reply " << i;
  }
  EXPECT_LT(store.peak_kib(), kCeilingKib);
}

// Defect 3: a legacy WATCH_KEY watcher that never reads grew the store by every push. Pushes cannot
// wait as requests do: a watcher over its budget is closed.
TEST(StoreLimits, AWatcherThatNeverReadsIsClosedNotBuffered) {
  StoreProcess store;
  RawPeer watcher(store.port());
  watcher.send(legacy(wire::Op::watch_key, {"/w"}));
  RawPeer setter(store.port());
  std::string value(kMiB, 'w');
  for (int i = 0; i < 64; ++i) {  // 128 MiB of pushes (old and new value each)
    setter.send(legacy(wire::Op::set, {"/w"}, {value}));
  }
  setter.send(legacy(wire::Op::num_keys));
  setter.read_reply(wire::Op::num_keys);
  EXPECT_LT(store.peak_kib(), kCeilingKib);
  EXPECT_TRUE(watcher.closed_by_server());
  store.expect_serves_a_fresh_client();
}

// Defect 3: before authenticating, 1 byte of AUTH_CHALLENGE queued a 40-byte nonce reply, so a
// megabyte of them queued 40 MiB. An unauthenticated peer now has a few KiB each way.
TEST(StoreLimits, AnUnauthenticatedFloodHoldsOnlyAFewKib) {
  TempDir token_dir;
  std::ofstream(token_dir.path() / "token") << "s3cret\n";
  StoreProcess store({"--token-file", (token_dir.path() / "token").string()});
  store.expect_serves_a_fresh_client("s3cret");
  const long before = store.peak_kib();
  RawPeer attacker(store.port());
  std::string flood = current(wire::Op::validate);
  flood += std::string(4 * kMiB, static_cast<char>(*wire::op_code(wire::Dialect::current, wire::Op::auth_challenge)));
  attacker.send_until_refused(flood);
  store.expect_serves_a_fresh_client("s3cret");
  EXPECT_LT(store.peak_kib() - before, 8 * 1024) << "KiB held for one unauthenticated peer";
}

// Before authenticating, a request the handshake does not need is refused at its header, not
// buffered whole first.
TEST(StoreLimits, AnUnauthenticatedPeerCannotMakeTheStoreBufferAValue) {
  TempDir token_dir;
  std::ofstream(token_dir.path() / "token") << "s3cret\n";
  StoreProcess store({"--token-file", (token_dir.path() / "token").string()});
  RawPeer attacker(store.port());
  std::string set = current(wire::Op::validate) + current(wire::Op::set, {"/k"}, {std::string(kValueBytes, 'x')});
  attacker.send(std::string_view(set).substr(0, 64));  // the SET's header and key, none of its value
  EXPECT_TRUE(attacker.closed_by_server());
  store.expect_serves_a_fresh_client("s3cret");
}

// A rough edge: APPEND grew a value past --max-value-bytes, which no SET could have made.
TEST(StoreLimits, AppendPastTheValueLimitClosesTheConnectionAndAppendsNothing) {
  StoreProcess store({"--max-value-bytes", "1024"});
  set_value(store, "/log", std::string(1000, 'l'));
  RawPeer appender(store.port());
  appender.send(legacy(wire::Op::append, {"/log"}, {std::string(24, 'm')}) + legacy(wire::Op::num_keys));
  appender.read_reply(wire::Op::num_keys);  // 1024 bytes: still within the limit
  appender.send(legacy(wire::Op::append, {"/log"}, {"n"}));
  EXPECT_TRUE(appender.closed_by_server());
  std::string log = store.client().get("log");
  EXPECT_EQ(log.size(), 1024U);
  EXPECT_EQ(log.back(), 'm');
}

// A rough edge: a second VALIDATE was accepted silently; the dialect allows it once, first.
TEST(StoreLimits, ASecondValidateClosesTheConnection) {
  StoreProcess store;
  RawPeer peer(store.port());
  wire::Request ping = request(wire::Op::ping);
  ping.number = 42;
  peer.send(current(wire::Op::validate) + wire::encode_request(wire::Dialect::current, ping));
  EXPECT_NO_THROW(peer.read_reply(wire::Op::ping));
  peer.send(current(wire::Op::validate));
  EXPECT_TRUE(peer.closed_by_server());
  store.expect_serves_a_fresh_client();
}

// WATCH_KEY registrations were a vector that grew with every request, even for the same key.
TEST(StoreLimits, WatchingOneKeyAgainAndAgainCostsNothingMore) {
  StoreProcess store;
  RawPeer watcher(store.port());
  std::string watch = legacy(wire::Op::watch_key, {"/" + std::string(8191, 'k')});
  constexpr int kWatches = 16000;  // 128 MiB of key copies if each were kept
  std::string batch;
  for (int i = 0; i < 1000; ++i) batch += watch;
  for (int sent = 0; sent < kWatches; sent += 1000) {
    watcher.send(batch);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(watcher.read_reply(wire::Op::watch_key).number, wire::kWatchRegistered);
  }
  EXPECT_LT(store.peak_kib(), kCeilingKib);
  store.expect_serves_a_fresh_client();
}

TEST(StoreLimits, WatchingTooManyKeysClosesTheConnection) {
  StoreProcess store;
  RawPeer watcher(store.port());
  std::string watches;
  for (std::size_t i = 0; i < KeySpace::kMaxWatchedKeys; ++i) watches += legacy(wire::Op::watch_key, {"/w" + std::to_string(i)});
  watcher.send(watches);
  for (std::size_t i = 0; i < KeySpace::kMaxWatchedKeys; ++i) watcher.read_reply(wire::Op::watch_key);
  watcher.send(legacy(wire::Op::watch_key, {"/one-too-many"}));
  EXPECT_TRUE(watcher.closed_by_server());
  store.expect_serves_a_fresh_client();
}

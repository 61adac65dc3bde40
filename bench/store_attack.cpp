/// store_attack: one hostile peer against a running ddprun-store, and the store's memory while it
/// attacks (bench/store_bench.py, store_attack_memory). Requests are built with
/// wire::encode_request. Attacks (one per run; the result is one JSON line on stdout):
///
///   multi_get     SET a value of --value-bytes, then one MULTI_GET naming it --count times.
///   unread_gets   SET a value of --value-bytes, then --count pipelined GETs of it, never read.
///   unread_watch  a legacy WATCH_KEY watcher that never reads; another connection SETs the watched
///                 key --count times to a value of --value-bytes (each push carries old and new).
///   auth_flood    VALIDATE, then --count bytes of AUTH_CHALLENGE (1 byte each), never reading; for
///                 a store that requires a token. Sends what the store takes until it stops taking.
///
/// While the attacker holds its connection (--settle seconds after its last byte, unread), the
/// store's VmRSS is sampled every 10 ms. Then: whether it still serves a fresh connection (PING),
/// what it holds once it has answered (it has run all the attacker sent by then), VmHWM (the peak
/// of the store's life: start a fresh store for each run), and last whether the store closed the
/// attacker (found by reading what it was sent, so after the rest).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/wire.hpp"

namespace wire = ddprun::rendezvous::wire;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "store_attack: %s\n", message.c_str());
  std::exit(2);
}

struct Options {
  std::string attack;
  int port = 0;
  int server_pid = 0;
  std::size_t value_bytes = 8 << 20;
  std::size_t count = 0;
  double settle_s = 1.0;
};

void usage() {
  std::printf(
      "usage: store_attack ATTACK --port P --server-pid PID [options]\n"
      "  ATTACK: multi_get | unread_gets | unread_watch | auth_flood\n"
      "  --value-bytes B   the value set and read (8388608)\n"
      "  --count N         keys named, GETs, SETs or flood bytes (per attack: 400, 64, 32, 1048576)\n"
      "  --settle S        seconds the attacker holds on, unread, after its last byte (1)\n"
      "Prints one JSON line on stdout.\n");
}

Options parse(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage();
    std::exit(argc < 2 ? 2 : 0);
  }
  Options o;
  o.attack = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string name = argv[i], value = argv[i + 1];
    if (name == "--port") o.port = std::stoi(value);
    else if (name == "--server-pid") o.server_pid = std::stoi(value);
    else if (name == "--value-bytes") o.value_bytes = std::stoul(value);
    else if (name == "--count") o.count = std::stoul(value);
    else if (name == "--settle") o.settle_s = std::stod(value);
    else die("unknown option " + name);
  }
  if (o.port <= 0 || o.server_pid <= 0) die("--port and --server-pid are required");
  const std::size_t defaults[] = {400, 64, 32, 1 << 20};
  const char* attacks[] = {"multi_get", "unread_gets", "unread_watch", "auth_flood"};
  bool known = false;
  for (int i = 0; i < 4; ++i) {
    if (o.attack != attacks[i]) continue;
    known = true;
    if (o.count == 0) o.count = defaults[i];
  }
  if (!known) die("unknown attack " + o.attack);
  return o;
}

/// A field of /proc/PID/status in kB; -1 once the process is gone (or a zombie).
long status_kib(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  long value = -1;
  while (std::getline(in, line)) {
    if (line.rfind("State:", 0) == 0 && line.find('Z') != std::string::npos) return -1;
    if (line.rfind(field + ":", 0) == 0) value = std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
  }
  return value;
}

/// A blocking TCP connection to 127.0.0.1:port.
class Connection {
 public:
  explicit Connection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) die(std::string("socket: ") + std::strerror(errno));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) ok_ = false;
  }
  ~Connection() { ::close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool ok() const { return ok_; }

  /// Writes everything, or as much as the peer takes before it stops taking for `quiet`.
  std::size_t send(const std::string& bytes, std::chrono::milliseconds quiet = std::chrono::hours(1)) {
    std::size_t off = 0;
    while (ok_ && off < bytes.size()) {
      pollfd p{fd_, POLLOUT, 0};
      int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(quiet.count(), 1 << 30)));
      if (ready == 0) break;  // the peer stopped reading
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) ok_ = false;
      else off += static_cast<std::size_t>(n);
    }
    return off;
  }
  /// Reads the reply to an `op` request (wire::decode_reply), taking exactly the bytes it needs;
  /// false when the connection ends first or the reply is malformed.
  bool read_reply(wire::Op op) {
    std::string buffer;
    for (;;) {
      wire::DecodedReply d = wire::decode_reply(
          op, {reinterpret_cast<const std::uint8_t*>(buffer.data()), buffer.size()}, wire::Limits{});
      if (d.status == wire::DecodeStatus::complete) return true;
      if (d.status == wire::DecodeStatus::invalid) return false;
      std::size_t off = buffer.size();
      buffer.resize(d.need_at_least);
      while (off < buffer.size()) {
        ssize_t n = ::recv(fd_, buffer.data() + off, buffer.size() - off, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += static_cast<std::size_t>(n);
      }
    }
  }
  /// Whether the peer ends the connection (EOF or reset) within `timeout`; what it sent before is
  /// read and dropped.
  bool closed_by_peer(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    std::string sink(1 << 20, '\0');
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      ssize_t n = ::recv(fd_, sink.data(), sink.size(), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool ok_ = true;
};

std::string request(wire::Dialect dialect, wire::Op op, std::vector<std::string> keys = {},
                    std::vector<std::string> values = {}) {
  wire::Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return wire::encode_request(dialect, r);
}

std::string legacy(wire::Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  return request(wire::Dialect::legacy, op, std::move(keys), std::move(values));
}

/// SETs key to value and waits for the store to have it (GETNUMKEYS answers after the SET ran).
bool set_value(int port, const std::string& key, const std::string& value) {
  Connection setter(port);
  setter.send(legacy(wire::Op::set, {key}, {value}) + legacy(wire::Op::num_keys));
  return setter.ok() && setter.read_reply(wire::Op::num_keys);
}

/// A fresh connection gets an answer to PING (allowed before authenticating, so this asks a store
/// with a token too).
bool serves_a_fresh_client(int port) {
  Connection fresh(port);
  if (!fresh.ok()) return false;
  fresh.send(request(wire::Dialect::current, wire::Op::validate) + request(wire::Dialect::current, wire::Op::ping));
  return fresh.ok() && fresh.read_reply(wire::Op::ping);
}

/// Samples VmRSS every 10 ms on its own thread, keeping the largest.
class RssSampler {
 public:
  explicit RssSampler(int pid) : pid_(pid), thread_([this] { run(); }) {}
  ~RssSampler() { stop(); }
  long stop() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
    return max_kib_;
  }

 private:
  void run() {
    while (running_) {
      max_kib_ = std::max(max_kib_.load(), status_kib(pid_, "VmRSS"));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  int pid_;
  std::atomic<bool> running_{true};
  std::atomic<long> max_kib_{-1};
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  const long rss_before = status_kib(o.server_pid, "VmRSS");
  const std::string value(o.value_bytes, 'v');
  const std::string key = "attack/value";
  std::size_t sent = 0;

  RssSampler sampler(o.server_pid);
  std::vector<std::unique_ptr<Connection>> held;  // the attacker's connections, held unread
  const auto start = Clock::now();
  if (o.attack == "multi_get") {
    if (!set_value(o.port, key, value)) die("could not set the value");
    held.push_back(std::make_unique<Connection>(o.port));
    sent = held.back()->send(legacy(wire::Op::multi_get, std::vector<std::string>(o.count, key)));
  } else if (o.attack == "unread_gets") {
    if (!set_value(o.port, key, value)) die("could not set the value");
    std::string gets;
    for (std::size_t i = 0; i < o.count; ++i) gets += legacy(wire::Op::get, {key});
    held.push_back(std::make_unique<Connection>(o.port));
    sent = held.back()->send(gets);
  } else if (o.attack == "unread_watch") {
    held.push_back(std::make_unique<Connection>(o.port));
    held.back()->send(legacy(wire::Op::watch_key, {key}));
    Connection setter(o.port);
    for (std::size_t i = 0; i < o.count && setter.ok(); ++i) sent += setter.send(legacy(wire::Op::set, {key}, {value}));
    setter.send(legacy(wire::Op::num_keys));
    setter.read_reply(wire::Op::num_keys);  // every SET ran
  } else {  // auth_flood
    std::string flood = request(wire::Dialect::current, wire::Op::validate);
    flood.append(o.count, static_cast<char>(*wire::op_code(wire::Dialect::current, wire::Op::auth_challenge)));
    held.push_back(std::make_unique<Connection>(o.port));
    sent = held.back()->send(flood, std::chrono::milliseconds(static_cast<long>(o.settle_s * 1000)));
  }
  const double attack_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.settle_s));
  // One thread serves every connection in turn: once a fresh client has its answer, the store has
  // run everything the attacker sent before (a slow store may take seconds to build its replies).
  const bool alive = status_kib(o.server_pid, "VmRSS") >= 0 && serves_a_fresh_client(o.port);
  const long rss_during = status_kib(o.server_pid, "VmRSS");
  const long hwm = status_kib(o.server_pid, "VmHWM");
  const long rss_max_sampled = sampler.stop();
  const bool attacker_closed = held.back()->closed_by_peer(std::chrono::seconds(2));

  std::printf(
      "{\"attack\": \"%s\", \"value_bytes\": %zu, \"count\": %zu, \"sent_bytes\": %zu, \"attack_ms\": %.1f, "
      "\"rss_before_kib\": %ld, \"rss_during_kib\": %ld, \"rss_max_sampled_kib\": %ld, \"vm_hwm_kib\": %ld, "
      "\"attacker_closed\": %s, \"store_alive\": %s}\n",
      o.attack.c_str(), o.value_bytes, o.count, sent, attack_ms, rss_before, rss_during, rss_max_sampled, hwm,
      attacker_closed ? "true" : "false", alive ? "true" : "false");
  return 0;
}

/// store_load: a load generator for TCPStore servers (ddprun-store, PyTorch's TCPStore), used by
/// bench/store_bench.py. It speaks the LEGACY dialect (PyTorch 1.13's numbering), which both
/// servers understand, so the very same bytes drive both. Every request is built with
/// wire::encode_request; replies are read as the fixed field sequences wire.hpp lists.
///
/// Non-blocking sockets in an edge-triggered epoll set per thread (barrier and idle use one thread;
/// throughput may split its connections over --threads): it drives 16384 connections from one
/// process. Modes (one per run; the result is one JSON line on stdout):
///
///   throughput  C connections, closed loop, for --warmup then --duration seconds. Each connection
///               cycles through two round trips: [SET key_a + GET key_b] then [ADD counter 1]. A
///               1.13 client's set() does not wait (legacy SET has no reply), so SET goes out in
///               the same write as the GET that follows it: 3 requests per 2 round trips. Keys are
///               drawn from --keys pre-set keys (GET always finds its key), counters from 64.
///               Reports requests/s (SET, GET and ADD all counted) and round-trip latency.
///   barrier     N connections each ADD a counter, then WAIT on a release key. The generator SETs
///               the release key (on a separate control connection) when an ADD reply says N.
///               Reports time from the first connect to the last ADD reply and to the last wake-up.
///   idle        N connections each send GETNUMKEYS and read the reply, then stay open, idle.
///               With --server-pid, reports the server's VmRSS before and after.
///
/// --connect-window W bounds the connections that are connecting or waiting for their first reply
/// (0 = no bound), so that a fast generator cannot overflow the server's accept queue.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <latch>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/wire.hpp"

namespace wire = ddprun::rendezvous::wire;

namespace {

// ------------------------------------------------------------------------------------ utilities

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

double ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "store_load: %s\n", message.c_str());
  std::exit(2);
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

thread_local std::uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
std::uint64_t next_random() {  // splitmix64
  std::uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::string encode(wire::Op op, std::vector<std::string> keys, std::vector<std::string> values = {},
                   std::int64_t delta = 0) {
  wire::Request request;
  request.op = op;
  request.keys = std::move(keys);
  request.values = std::move(values);
  request.delta = delta;
  return wire::encode_request(wire::Dialect::legacy, request);
}

/// "VmRSS" or "Threads" of /proc/<pid>/status, in the file's unit (kB for VmRSS); -1 if absent.
long proc_status_field(int pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::strtol(line.c_str() + prefix.size(), nullptr, 10);
  }
  return -1;
}

/// utime + stime of a process in ms (clock ticks), -1 if unreadable.
double proc_cpu_ms(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 0; i < 13 && fields >> field; ++i) {
    if (i == 11) utime = std::stod(field);
    if (i == 12) stime = std::stod(field);
  }
  return (utime + stime) * 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double self_cpu_ms() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto tv_ms = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3; };
  return tv_ms(usage.ru_utime) + tv_ms(usage.ru_stime);
}

/// CPU time of the whole machine from /proc/stat's "cpu" line, in ms: busy (everything but idle
/// and iowait) and steal (taken by the hypervisor).
struct MachineCpu {
  double busy_ms = -1, steal_ms = -1;
};
MachineCpu machine_cpu() {
  std::ifstream in("/proc/stat");
  std::string label;
  double f[8] = {};
  in >> label;
  for (double& x : f) in >> x;
  if (!in || label != "cpu") return {};
  const double tick_ms = 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  // user nice system idle iowait irq softirq steal
  return {(f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) * tick_ms, f[7] * tick_ms};
}

/// TcpExt ListenOverflows + ListenDrops from /proc/net/netstat (system-wide): SYNs a full accept
/// queue dropped, each of which costs its client a 1 s retransmit.
long listen_drops() {
  std::ifstream in("/proc/net/netstat");
  std::string names, values;
  while (std::getline(in, names) && std::getline(in, values)) {
    if (names.rfind("TcpExt:", 0) != 0) continue;
    std::istringstream n(names), v(values);
    std::string name, value;
    long total = 0;
    while (n >> name && v >> value) {
      if (name == "ListenOverflows" || name == "ListenDrops") total += std::stol(value);
    }
    return total;
  }
  return -1;
}

void raise_nofile(std::size_t needed) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    die("RLIMIT_NOFILE is " + std::to_string(limit.rlim_cur) + " (hard limit), need " + std::to_string(needed));
  }
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out;
}

/// A flat JSON object, written in insertion order.
class Json {
 public:
  Json& num(const std::string& key, double value) {
    char buf[64];
    if (std::isfinite(value)) {
      std::snprintf(buf, sizeof buf, "%.6g", value);
    } else {
      std::snprintf(buf, sizeof buf, "null");
    }
    return raw(key, buf);
  }
  Json& integer(const std::string& key, long long value) { return raw(key, std::to_string(value)); }
  Json& str(const std::string& key, const std::string& value) { return raw(key, "\"" + json_escape(value) + "\""); }
  std::string text() const { return "{" + body_ + "}"; }

 private:
  Json& raw(const std::string& key, const std::string& value) {
    if (!body_.empty()) body_ += ", ";
    body_ += "\"" + key + "\": " + value;
    return *this;
  }
  std::string body_;
};

// ------------------------------------------------------------------------------------ options

struct Options {
  std::string mode;
  std::string host = "127.0.0.1";
  int port = 0;
  std::size_t connections = 1;
  double duration_s = 3.0;
  double warmup_s = 0.5;
  double timeout_s = 60.0;
  std::size_t keys = 1024;
  std::size_t value_bytes = 64;
  std::size_t connect_window = 1024;
  int source_addrs = 16;
  int server_pid = 0;
  std::size_t threads = 1;
  double settle_s = 0.5;
  double hold_s = 0.0;
  std::string tag;
};

void usage() {
  std::printf(
      "usage: store_load MODE --port P [options]     MODE: throughput | barrier | idle\n"
      "  --host H            server address (127.0.0.1)\n"
      "  --port P            server port (required)\n"
      "  --connections N     connections (1)\n"
      "  --duration S        throughput: measured seconds (3)\n"
      "  --warmup S          throughput: unmeasured seconds first (0.5)\n"
      "  --timeout S         give up after S seconds and report what happened (60)\n"
      "  --keys K            throughput: keys set beforehand, read and overwritten (1024)\n"
      "  --value-bytes B     throughput: value size (64)\n"
      "  --connect-window W  at most W connections connecting or awaiting their first reply; 0 = all at once (1024)\n"
      "  --source-addrs A    bind client sockets to 127.0.0.1 .. 127.0.0.A, round robin (16)\n"
      "  --server-pid PID    read the server's VmRSS/Threads/CPU from /proc\n"
      "  --threads T         throughput: generator threads, each with its share of the connections (1)\n"
      "  --settle S          idle: wait S seconds before reading VmRSS (0.5)\n"
      "  --hold S            idle: keep the connections open S more seconds after measuring (0)\n"
      "  --tag T             barrier: key prefix suffix, so runs on one server do not collide\n"
      "Prints one JSON line with the results on stdout.\n");
}

Options parse_options(int argc, char** argv) {
  Options o;
  if (argc < 2) {
    usage();
    std::exit(2);
  }
  o.mode = argv[1];
  if (o.mode == "--help" || o.mode == "-h") {
    usage();
    std::exit(0);
  }
  if (o.mode != "throughput" && o.mode != "barrier" && o.mode != "idle") die("unknown mode " + o.mode);
  for (int i = 2; i < argc; ++i) {
    std::string name = argv[i];
    if (name == "--help" || name == "-h") {
      usage();
      std::exit(0);
    }
    if (i + 1 >= argc) die(name + " needs a value");
    std::string value = argv[++i];
    try {
      if (name == "--host") o.host = value;
      else if (name == "--port") o.port = std::stoi(value);
      else if (name == "--connections") o.connections = std::stoul(value);
      else if (name == "--duration") o.duration_s = std::stod(value);
      else if (name == "--warmup") o.warmup_s = std::stod(value);
      else if (name == "--timeout") o.timeout_s = std::stod(value);
      else if (name == "--keys") o.keys = std::stoul(value);
      else if (name == "--value-bytes") o.value_bytes = std::stoul(value);
      else if (name == "--connect-window") o.connect_window = std::stoul(value);
      else if (name == "--source-addrs") o.source_addrs = std::stoi(value);
      else if (name == "--server-pid") o.server_pid = std::stoi(value);
      else if (name == "--threads") o.threads = std::stoul(value);
      else if (name == "--settle") o.settle_s = std::stod(value);
      else if (name == "--hold") o.hold_s = std::stod(value);
      else if (name == "--tag") o.tag = value;
      else die("unknown option " + name);
    } catch (const std::logic_error&) {
      die("bad value for " + name + ": " + value);
    }
  }
  if (o.port <= 0 || o.port > 65535) die("--port is required");
  if (o.connections == 0) die("--connections must be >= 1");
  if (o.keys == 0) o.keys = 1;
  if (o.source_addrs < 1 || o.source_addrs > 254) die("--source-addrs must be 1..254");
  if (o.tag.empty()) o.tag = std::to_string(::getpid()) + "-" + std::to_string(now_ns());
  return o;
}

// ------------------------------------------------------------------------------------ sockets

sockaddr_in server_address(const Options& o) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(o.port));
  if (::inet_pton(AF_INET, o.host.c_str(), &addr.sin_addr) != 1) die("--host must be an IPv4 address");
  return addr;
}

/// Replies are decoded with the server's default limits.
const wire::Limits kReplyLimits{};

/// A blocking connection for setup and for the barrier's release SET.
class ControlConnection {
 public:
  explicit ControlConnection(const sockaddr_in& server) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) die(errno_text("socket"));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&server), sizeof server) != 0) {
      die(errno_text("connect to the server"));
    }
  }
  ~ControlConnection() { ::close(fd_); }
  ControlConnection(const ControlConnection&) = delete;
  ControlConnection& operator=(const ControlConnection&) = delete;

  void send(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::write(fd_, bytes.data() + off, bytes.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die(errno_text("control connection write"));
      off += static_cast<std::size_t>(n);
    }
  }
  void read_exact(void* out, std::size_t size) {
    auto* p = static_cast<char*>(out);
    while (size > 0) {
      ssize_t n = ::read(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die(n == 0 ? "control connection closed by the server" : errno_text("control connection read"));
      p += n;
      size -= static_cast<std::size_t>(n);
    }
  }
  /// The reply to an `op` request, reading exactly the bytes it still needs.
  wire::Reply read_reply(wire::Op op) {
    std::vector<std::uint8_t> in;
    for (;;) {
      wire::DecodedReply d = wire::decode_reply(op, in, kReplyLimits);
      if (d.status == wire::DecodeStatus::complete) return std::move(d.reply);
      if (d.status == wire::DecodeStatus::invalid) die("control connection: invalid reply: " + d.error);
      const std::size_t had = in.size();
      in.resize(d.need_at_least);
      read_exact(in.data() + had, in.size() - had);
    }
  }

 private:
  int fd_ = -1;
};

enum class State : std::uint8_t { unused, connecting, open, failed, closed };

struct Conn {
  int fd = -1;
  State state = State::unused;
  bool awaiting = false;  // a reply is awaited: the reply to `awaited` (wire::decode_reply)
  wire::Op awaited = wire::Op::set;
  std::uint8_t phase = 0;  // throughput: 0 = SET+GET next, 1 = ADD next; barrier: 0 = ADD, 1 = WAIT
  bool first_reply_pending = false;
  std::int64_t sent_ns = 0;
  std::string in;        // reply bytes so far
  std::string out;       // bytes not yet written (after a short write)
  std::size_t out_off = 0;
};

/// The reply's value, once complete: its number (i64, u8), or the byte count of its value (GET).
struct Reply {
  bool complete = false;
  std::int64_t value = 0;
  std::string invalid;  // what was wrong with a malformed reply
};


/// Drives the connections: connect, write, read replies. The mode supplies the callbacks.
class Driver {
 public:
  Driver(const Options& o, std::size_t n) : o_(o), server_(server_address(o)), conns_(n) {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) die(errno_text("epoll_create1"));
  }
  ~Driver() {
    for (auto& c : conns_) {
      if (c.fd >= 0) ::close(c.fd);
    }
    ::close(epfd_);
  }
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  std::size_t size() const { return conns_.size(); }
  Conn& conn(std::size_t i) { return conns_[i]; }

  std::size_t launched = 0;       // connects started
  std::size_t connected = 0;      // connects completed
  std::size_t failed = 0;         // connections that failed or were closed by the server
  std::size_t window_used = 0;    // connecting or awaiting the first reply
  std::string first_error;

  /// Takes connection i out of the connect window without a reply (it will not send yet).
  void release_window(std::size_t i) {
    Conn& c = conns_[i];
    if (c.first_reply_pending) {
      c.first_reply_pending = false;
      --window_used;
    }
  }

  /// Starts connects while the window allows.
  void launch_more() {
    while (launched < conns_.size() && (o_.connect_window == 0 || window_used < o_.connect_window)) {
      start_connect(launched++);
    }
  }

  /// Sends bytes from up to two buffers in one write, then awaits the reply to `awaited`; keeps what
  /// did not fit.
  void send(std::size_t i, std::string_view a, std::string_view b, wire::Op awaited) {
    Conn& c = conns_[i];
    c.awaiting = true;
    c.awaited = awaited;
    c.sent_ns = now_ns();
    if (!c.out.empty()) {  // still flushing: queue behind
      c.out.append(a).append(b);
      return;
    }
    iovec iov[2] = {{const_cast<char*>(a.data()), a.size()}, {const_cast<char*>(b.data()), b.size()}};
    ssize_t n = ::writev(c.fd, iov, b.empty() ? 1 : 2);
    std::size_t total = a.size() + b.size();
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) return fail(i, errno_text("write"));
      n = 0;
    }
    if (static_cast<std::size_t>(n) < total) {
      std::string rest;
      rest.append(a).append(b);
      c.out = rest.substr(static_cast<std::size_t>(n));
      c.out_off = 0;
    }
  }

  /// Runs the event loop until done() or the deadline (monotonic ns). Returns false on deadline.
  template <class OnConnected, class OnReply, class Done>
  bool run(std::int64_t deadline, OnConnected on_connected, OnReply on_reply, Done done) {
    epoll_event events[1024];
    while (!done()) {
      std::int64_t left = deadline - now_ns();
      if (left <= 0) return false;
      int timeout_ms = static_cast<int>(std::min<std::int64_t>(left / 1'000'000 + 1, 100));
      int n = ::epoll_wait(epfd_, events, 1024, timeout_ms);
      if (n < 0) {
        if (errno == EINTR) continue;
        die(errno_text("epoll_wait"));
      }
      for (int k = 0; k < n; ++k) {
        std::size_t i = events[k].data.u32;
        Conn& c = conns_[i];
        std::uint32_t ev = events[k].events;
        if (c.state == State::connecting) {
          if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))) continue;
          int err = 0;
          socklen_t len = sizeof err;
          ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
          if (err != 0) {
            errno = err;
            fail(i, errno_text("connect"));
            continue;
          }
          c.state = State::open;
          ++connected;
          on_connected(i);
        }
        if (c.state != State::open) continue;
        if ((ev & EPOLLOUT) && !c.out.empty()) flush(i);
        if (c.state == State::open && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))) read_replies(i, on_reply);
      }
      launch_more();
    }
    return true;
  }

  void close_all() {
    for (auto& c : conns_) {
      if (c.fd >= 0) ::close(c.fd);
      c.fd = -1;
      if (c.state == State::open || c.state == State::connecting) c.state = State::closed;
    }
  }

 private:
  void start_connect(std::size_t i) {
    Conn& c = conns_[i];
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) return fail(i, errno_text("socket"));
    int one = 1;
    ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (o_.source_addrs > 1) {  // 127.0.0.x: more source ports than one address has
      ::setsockopt(c.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
      sockaddr_in src{};
      src.sin_family = AF_INET;
      src.sin_addr.s_addr = htonl(0x7F000001u + static_cast<std::uint32_t>(i % static_cast<std::size_t>(o_.source_addrs)));
      if (::bind(c.fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return fail(i, errno_text("bind"));
    }
    c.state = State::connecting;
    c.first_reply_pending = true;
    ++window_used;
    if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&server_), sizeof server_) != 0 && errno != EINPROGRESS) {
      return fail(i, errno_text("connect"));
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, c.fd, &ev) != 0) return fail(i, errno_text("epoll_ctl"));
  }

  void fail(std::size_t i, const std::string& why) {
    Conn& c = conns_[i];
    if (c.state == State::failed) return;
    if (first_error.empty()) first_error = "connection " + std::to_string(i) + ": " + why;
    if (c.first_reply_pending) {
      c.first_reply_pending = false;
      --window_used;
    }
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
    c.state = State::failed;
    ++failed;
  }

  void flush(std::size_t i) {
    Conn& c = conns_[i];
    while (c.out_off < c.out.size()) {
      ssize_t n = ::write(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        return fail(i, errno_text("write"));
      }
      c.out_off += static_cast<std::size_t>(n);
    }
    c.out.clear();
    c.out_off = 0;
  }

  static Reply parse(Conn& c) {
    Reply r;
    if (!c.awaiting) return r;
    const wire::DecodedReply d = wire::decode_reply(
        c.awaited, {reinterpret_cast<const std::uint8_t*>(c.in.data()), c.in.size()}, kReplyLimits);
    if (d.status == wire::DecodeStatus::need_more) return r;
    if (d.status == wire::DecodeStatus::invalid) {
      r.invalid = d.error;
      return r;
    }
    r.value = d.reply.values.empty() ? d.reply.number : static_cast<std::int64_t>(d.reply.values.front().size());
    c.in.erase(0, d.consumed);
    r.complete = true;
    c.awaiting = false;
    return r;
  }

  template <class OnReply>
  void read_replies(std::size_t i, OnReply& on_reply) {
    Conn& c = conns_[i];
    char buf[16384];
    for (;;) {
      ssize_t n = ::read(c.fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        return fail(i, errno_text("read"));
      }
      if (n == 0) return fail(i, "closed by the server");
      c.in.append(buf, static_cast<std::size_t>(n));
      for (;;) {
        if (!c.awaiting) {
          if (!c.in.empty()) return fail(i, "unexpected bytes from the server");
          break;
        }
        Reply r = parse(c);
        if (!r.invalid.empty()) return fail(i, "invalid reply: " + r.invalid);
        if (!r.complete) break;
        if (c.first_reply_pending) {
          c.first_reply_pending = false;
          --window_used;
        }
        on_reply(i, r.value);
        if (c.state != State::open) return;
      }
      // A short read drained the socket; with edge triggering, data arriving later brings a new
      // event, so the read that would only say EAGAIN is saved.
      if (static_cast<std::size_t>(n) < sizeof buf) return;
    }
  }

  const Options& o_;
  sockaddr_in server_;
  std::vector<Conn> conns_;
  int epfd_ = -1;
};

// ------------------------------------------------------------------------------------ statistics

double percentile(std::vector<std::uint32_t>& xs, double q) {
  if (xs.empty()) return NAN;
  std::size_t k = static_cast<std::size_t>(q * static_cast<double>(xs.size() - 1) + 0.5);
  std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(k), xs.end());
  return static_cast<double>(xs[k]) / 1e6;  // ms
}

void add_latency_fields(Json& j, const std::string& prefix, std::vector<std::uint32_t> xs) {
  j.integer(prefix + "samples", static_cast<long long>(xs.size()));
  j.num(prefix + "p50_ms", percentile(xs, 0.50));
  j.num(prefix + "p99_ms", percentile(xs, 0.99));
  j.num(prefix + "max_ms", xs.empty() ? NAN : static_cast<double>(*std::max_element(xs.begin(), xs.end())) / 1e6);
}

// ------------------------------------------------------------------------------------ modes

/// What one throughput thread measured.
struct ThroughputPart {
  std::vector<std::uint32_t> lat_setget, lat_add;
  std::uint64_t requests = 0, round_trips = 0, bad_get_replies = 0;
  std::size_t connected = 0, failed = 0;
  bool timed_out = false;
  std::string error;
};

int run_throughput(const Options& o) {
  raise_nofile(o.connections + 64);
  const sockaddr_in server = server_address(o);

  // Requests, encoded once: SET key_i, GET key_i, ADD counter_c 1.
  const std::string payload(o.value_bytes, 'v');
  constexpr std::size_t kCounters = 64;
  std::vector<std::string> set_req, get_req, add_req;
  for (std::size_t i = 0; i < o.keys; ++i) {
    std::string key = "bench/key/" + std::to_string(i);
    set_req.push_back(encode(wire::Op::set, {key}, {payload}));
    get_req.push_back(encode(wire::Op::get, {key}));
  }
  for (std::size_t i = 0; i < kCounters; ++i) {
    add_req.push_back(encode(wire::Op::add, {"bench/counter/" + std::to_string(i)}, {}, 1));
  }

  {  // Every key exists before anyone GETs it; the ADD reply says the SETs were applied.
    ControlConnection control(server);
    std::string batch;
    for (const auto& r : set_req) batch += r;
    batch += add_req[0];
    control.send(batch);
    control.read_reply(wire::Op::add);
  }

  // The connections are split over --threads threads, each with its own epoll set. All connect
  // first; then the main thread sets the clock and lets them start together.
  const std::size_t threads = std::max<std::size_t>(1, std::min(o.threads, o.connections));
  std::vector<ThroughputPart> parts(threads);
  std::latch connected(static_cast<std::ptrdiff_t>(threads));
  std::latch go(1);
  std::atomic<bool> abort{false};
  std::int64_t t_measure = 0, t_end = 0;  // written before `go` opens
  const std::int64_t t_connect = now_ns();

  auto worker = [&](std::size_t w) {
    ThroughputPart& part = parts[w];
    rng_state ^= (w + 1) * 0xD1B54A32D192ED03ULL;
    const std::size_t n = o.connections / threads + (w < o.connections % threads ? 1 : 0);
    Driver d(o, n);
    d.launch_more();
    bool ok = d.run(
        t_connect + static_cast<std::int64_t>(o.timeout_s * 1e9), [&](std::size_t i) { d.release_window(i); },
        [](std::size_t, std::int64_t) {}, [&] { return d.connected + d.failed == d.size(); });
    part.connected = d.connected;
    part.failed = d.failed;
    part.timed_out = !ok;
    part.error = d.first_error;
    connected.count_down();
    go.wait();
    if (abort) return;

    part.lat_setget.reserve(1 << 19);
    part.lat_add.reserve(1 << 19);
    std::size_t finished = 0;
    auto issue = [&](std::size_t i) {
      Conn& c = d.conn(i);
      if (c.phase == 0) {
        d.send(i, set_req[next_random() % o.keys], get_req[next_random() % o.keys], wire::Op::get);
      } else {
        d.send(i, add_req[next_random() % kCounters], {}, wire::Op::add);
      }
    };
    for (std::size_t i = 0; i < d.size(); ++i) {
      d.conn(i).phase = static_cast<std::uint8_t>(next_random() & 1);
      issue(i);
    }
    auto on_reply = [&](std::size_t i, std::int64_t value) {
      Conn& c = d.conn(i);
      const std::int64_t t = now_ns();
      if (t >= t_measure && t < t_end) {
        auto lat = static_cast<std::uint32_t>(std::min<std::int64_t>(t - c.sent_ns, UINT32_MAX));
        if (c.phase == 0) {
          part.lat_setget.push_back(lat);
          part.requests += 2;
          if (value != static_cast<std::int64_t>(o.value_bytes)) ++part.bad_get_replies;
        } else {
          part.lat_add.push_back(lat);
          part.requests += 1;
        }
        ++part.round_trips;
      }
      c.phase ^= 1;
      if (t < t_end) {
        issue(i);
      } else {
        ++finished;
      }
    };
    ok = d.run(t_end + static_cast<std::int64_t>(o.timeout_s * 1e9), [](std::size_t) {}, on_reply,
               [&] { return finished + d.failed >= d.size(); });
    part.failed = d.failed;
    part.timed_out = !ok;
    if (part.error.empty()) part.error = d.first_error;
    d.close_all();
  };

  std::vector<std::thread> pool;
  for (std::size_t w = 0; w < threads; ++w) pool.emplace_back(worker, w);
  connected.wait();
  std::size_t n_connected = 0, n_failed = 0;
  bool connect_timeout = false;
  std::string error;
  for (const auto& part : parts) {
    n_connected += part.connected;
    n_failed += part.failed;
    connect_timeout = connect_timeout || part.timed_out;
    if (error.empty()) error = part.error;
  }
  if (n_failed > 0 || connect_timeout) {
    abort = true;
    go.count_down();
    for (auto& t : pool) t.join();
    Json j;
    j.str("mode", "throughput").integer("connections", static_cast<long long>(o.connections));
    j.str("status", connect_timeout ? "timeout" : "error").integer("connected", static_cast<long long>(n_connected));
    j.str("error", error.empty() ? "connect timed out" : error);
    std::printf("%s\n", j.text().c_str());
    return 1;
  }
  const double connect_ms = ms(now_ns() - t_connect);
  const std::int64_t t_start = now_ns();
  t_measure = t_start + static_cast<std::int64_t>(o.warmup_s * 1e9);
  t_end = t_measure + static_cast<std::int64_t>(o.duration_s * 1e9);
  go.count_down();

  // CPU of the server and of this generator over the measured window.
  auto sleep_until = [](std::int64_t t) {
    for (std::int64_t left = t - now_ns(); left > 0; left = t - now_ns()) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(left));
    }
  };
  sleep_until(t_measure);
  const double server_cpu0 = o.server_pid > 0 ? proc_cpu_ms(o.server_pid) : -1, self_cpu0 = self_cpu_ms();
  const MachineCpu machine0 = machine_cpu();
  sleep_until(t_end);
  const double server_cpu1 = o.server_pid > 0 ? proc_cpu_ms(o.server_pid) : -1, self_cpu1 = self_cpu_ms();
  const MachineCpu machine1 = machine_cpu();
  for (auto& t : pool) t.join();
  const std::int64_t t_drained = now_ns();

  std::vector<std::uint32_t> lat_setget, lat_add;
  std::uint64_t requests = 0, round_trips = 0, bad = 0;
  bool timed_out = false;
  for (auto& part : parts) {
    lat_setget.insert(lat_setget.end(), part.lat_setget.begin(), part.lat_setget.end());
    lat_add.insert(lat_add.end(), part.lat_add.begin(), part.lat_add.end());
    requests += part.requests;
    round_trips += part.round_trips;
    bad += part.bad_get_replies;
    n_failed += part.failed;
    timed_out = timed_out || part.timed_out;
    if (error.empty()) error = part.error;
  }
  const double window_s = static_cast<double>(t_end - t_measure) / 1e9;
  std::vector<std::uint32_t> all(lat_setget);
  all.insert(all.end(), lat_add.begin(), lat_add.end());
  Json j;
  j.str("mode", "throughput").integer("connections", static_cast<long long>(o.connections));
  j.integer("threads", static_cast<long long>(threads));
  j.str("status", timed_out ? "timeout" : n_failed > 0 || bad > 0 ? "error" : "ok");
  if (!error.empty()) j.str("error", error);
  j.num("duration_s", window_s).num("connect_ms", connect_ms);
  j.num("ops_per_s", static_cast<double>(requests) / window_s);
  j.num("round_trips_per_s", static_cast<double>(round_trips) / window_s);
  add_latency_fields(j, "", all);
  add_latency_fields(j, "setget_", lat_setget);
  add_latency_fields(j, "add_", lat_add);
  j.integer("bad_get_replies", static_cast<long long>(bad));
  j.num("drain_ms", ms(t_drained - t_end));
  if (server_cpu0 >= 0 && server_cpu1 >= 0) j.num("server_cpu_pct", (server_cpu1 - server_cpu0) / 10.0 / window_s);
  j.num("generator_cpu_pct", (self_cpu1 - self_cpu0) / 10.0 / window_s);
  if (machine0.busy_ms >= 0 && machine1.busy_ms >= 0) {  // all CPUs: 100% per CPU
    j.num("machine_busy_pct", (machine1.busy_ms - machine0.busy_ms) / 10.0 / window_s);
    j.num("machine_steal_pct", (machine1.steal_ms - machine0.steal_ms) / 10.0 / window_s);
  }
  j.integer("cpus", ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%s\n", j.text().c_str());
  return !timed_out && n_failed == 0 && bad == 0 ? 0 : 1;
}

int run_barrier(const Options& o) {
  raise_nofile(o.connections + 64);
  const sockaddr_in server = server_address(o);
  const std::string prefix = "bench/barrier/" + o.tag + "/";
  const std::string add_req = encode(wire::Op::add, {prefix + "count"}, {}, 1);
  const std::string wait_req = encode(wire::Op::wait, {prefix + "release"});
  const std::string release_req = encode(wire::Op::set, {prefix + "release"}, {"1"});
  const auto n = static_cast<std::int64_t>(o.connections);

  ControlConnection control(server);
  Driver d(o, o.connections);
  const long drops0 = listen_drops();
  std::size_t add_replies = 0, woken = 0, bad_wakes = 0;
  std::int64_t t_all_connected = 0, t_last_add = 0, t_release = 0, t_last_wake = 0, max_add_value = 0;
  const std::int64_t t0 = now_ns();
  d.launch_more();
  auto on_connected = [&](std::size_t i) {
    d.conn(i).phase = 0;
    d.send(i, add_req, {}, wire::Op::add);
    if (d.connected == d.size()) t_all_connected = now_ns();
  };
  auto on_reply = [&](std::size_t i, std::int64_t value) {
    Conn& c = d.conn(i);
    const std::int64_t t = now_ns();
    if (c.phase == 0) {
      ++add_replies;
      t_last_add = t;
      max_add_value = std::max(max_add_value, value);
      c.phase = 1;
      d.send(i, wait_req, {}, wire::Op::wait);
      if (value == n) {  // the last rank in: release everyone
        control.send(release_req);
        t_release = now_ns();
      }
    } else {
      ++woken;
      t_last_wake = t;
      if (value != wire::kStopWaiting) ++bad_wakes;
    }
  };
  const bool ok = d.run(t0 + static_cast<std::int64_t>(o.timeout_s * 1e9), on_connected, on_reply,
                        [&] { return woken == d.size() || d.failed > 0; });
  const std::int64_t t_stop = now_ns();
  const long drops1 = listen_drops();
  d.close_all();

  const bool complete = ok && woken == d.size() && bad_wakes == 0;
  auto rel = [&](std::int64_t t) { return t > 0 ? ms(t - t0) : NAN; };
  Json j;
  j.str("mode", "barrier").integer("connections", n);
  j.str("status", complete ? "ok" : !ok ? "timeout" : "error");
  if (!d.first_error.empty()) j.str("error", d.first_error);
  j.num("timeout_s", o.timeout_s).integer("connect_window", static_cast<long long>(o.connect_window));
  j.integer("connected", static_cast<long long>(d.connected));
  j.integer("add_replies", static_cast<long long>(add_replies));
  j.integer("max_add_value", max_add_value);
  j.integer("woken", static_cast<long long>(woken));
  j.integer("bad_wakes", static_cast<long long>(bad_wakes));
  j.num("all_connected_ms", rel(t_all_connected));
  j.num("last_add_ms", rel(t_last_add));
  j.num("release_ms", rel(t_release));
  j.num("last_wake_ms", rel(t_last_wake));
  j.num("wake_after_last_add_ms", t_last_wake > 0 && t_last_add > 0 ? ms(t_last_wake - t_last_add) : NAN);
  j.num("total_ms", complete ? ms(t_last_wake - t0) : NAN);
  j.num("stopped_ms", ms(t_stop - t0));
  if (drops0 >= 0 && drops1 >= 0) j.integer("listen_drops", drops1 - drops0);
  std::printf("%s\n", j.text().c_str());
  return complete ? 0 : 1;
}

int run_idle(const Options& o) {
  raise_nofile(o.connections + 64);
  const std::string request = encode(wire::Op::num_keys, {});
  auto settle = [&] { std::this_thread::sleep_for(std::chrono::duration<double>(o.settle_s)); };
  long rss0 = -1, threads0 = -1;
  if (o.server_pid > 0) {
    rss0 = proc_status_field(o.server_pid, "VmRSS");
    threads0 = proc_status_field(o.server_pid, "Threads");
  }
  Driver d(o, o.connections);
  std::size_t replies = 0;
  const std::int64_t t0 = now_ns();
  d.launch_more();
  const bool ok = d.run(
      t0 + static_cast<std::int64_t>(o.timeout_s * 1e9), [&](std::size_t i) { d.send(i, request, {}, wire::Op::num_keys); },
      [&](std::size_t, std::int64_t) { ++replies; }, [&] { return replies + d.failed == d.size(); });
  const double open_ms = ms(now_ns() - t0);
  settle();
  long rss1 = -1, threads1 = -1;
  if (o.server_pid > 0) {
    rss1 = proc_status_field(o.server_pid, "VmRSS");
    threads1 = proc_status_field(o.server_pid, "Threads");
  }
  Json j;
  j.str("mode", "idle").integer("connections", static_cast<long long>(o.connections));
  j.str("status", !ok ? "timeout" : d.failed > 0 ? "error" : "ok");
  if (!d.first_error.empty()) j.str("error", d.first_error);
  j.integer("replies", static_cast<long long>(replies));
  j.num("open_ms", open_ms);
  if (o.server_pid > 0) {
    j.integer("rss_before_kib", rss0).integer("rss_after_kib", rss1);
    j.num("kib_per_conn", static_cast<double>(rss1 - rss0) / static_cast<double>(replies > 0 ? replies : 1));
    j.integer("threads_before", threads0).integer("threads_after", threads1);
  }
  std::printf("%s\n", j.text().c_str());
  std::fflush(stdout);
  if (o.hold_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.hold_s));
  d.close_all();
  return ok && d.failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  rng_state ^= static_cast<std::uint64_t>(now_ns());
  if (o.mode == "throughput") return run_throughput(o);
  if (o.mode == "barrier") return run_barrier(o);
  return run_idle(o);
}

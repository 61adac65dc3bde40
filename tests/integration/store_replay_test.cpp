// PyTorch 2.11's TCPStore client, replayed: the conversation it had with PyTorch's own server
// (data/pytorch-2.11/tcpstore-client-vs-pytorch-server.jsonl, recorded through a logging TCP proxy
// on a machine with PyTorch 2.11; a byte-identical copy of ../shared/reference/pytorch-2.11/) is sent
// to ddprun's store, which must answer every request with the bytes PyTorch's server sent. PyTorch
// 2.x clients are where most of the store's traffic comes from, and no PyTorch 2.x can be installed
// where CI runs.
//
// Each line of the recording is one recv() of the proxy, and TCP may split or merge what a peer
// wrote, so the replay works on turns, not lines: a turn is what the client sent before the server
// answered (its chunks, in order) and the answer, compared as one byte stream. The one place where
// time has a meaning: the client's WAIT on a key nobody sets, which it gave up on after 300 ms by
// sending CANCEL_WAIT. A gap of 100 ms or more between two of the client's chunks with no answer
// between them is such a wait: the replay sends the first chunk, requires the store to say nothing
// for the recorded gap (the wait is pending: no reply may come), and only then sends the next.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "rendezvous/store_server.hpp"

using namespace ddprun::rendezvous;
using namespace std::chrono_literals;

namespace {

/// A gap of the client's this long, answered by nothing, is a wait it gave up on.
constexpr double kQuietGapSeconds = 0.1;

struct Send {
  std::string bytes;
  std::chrono::milliseconds then_silence{0};  ///< the store must say nothing this long after it
};

struct Turn {
  std::vector<Send> sends;
  std::string reply;  ///< what PyTorch's server answered to them, all of it
  int first_line = 0;  ///< the recording's line where the turn starts (1-based), for messages
};

std::string from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) throw std::runtime_error("odd-length hex: " + hex);
  std::string bytes;
  for (std::size_t i = 0; i < hex.size(); i += 2) bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

std::string to_hex(const std::string& bytes) {
  std::string hex;
  char digits[3];
  for (unsigned char c : bytes) {
    std::snprintf(digits, sizeof digits, "%02x", c);
    hex += digits;
  }
  return hex;
}

/// The recording as turns (pure: lines of JSON in, turns out). Throws naming the line when a line
/// is not what the recorder writes, or when it holds more than the one connection the replay knows.
std::vector<Turn> turns_of(std::istream& recording) {
  std::vector<Turn> turns;
  std::string line;
  int number = 0;
  int opens = 0;
  double last_send_time = 0;
  while (std::getline(recording, line)) {
    ++number;
    if (line.empty()) continue;
    const auto entry = nlohmann::json::parse(line);
    if (entry.contains("meta")) continue;
    const std::string dir = entry.at("dir");
    const double t = entry.at("t");
    if (dir == "open") {
      if (++opens > 1) throw std::runtime_error("line " + std::to_string(number) + ": a second connection");
      continue;
    }
    if (dir == "close") continue;
    const std::string bytes = from_hex(entry.at("hex"));
    if (dir == "c2s") {
      if (turns.empty() || !turns.back().reply.empty()) turns.push_back(Turn{.first_line = number});
      auto& sends = turns.back().sends;
      if (!sends.empty() && t - last_send_time >= kQuietGapSeconds) {
        sends.back().then_silence = std::chrono::milliseconds(static_cast<long>((t - last_send_time) * 1000));
        sends.push_back(Send{bytes});
      } else if (!sends.empty()) {
        sends.back().bytes += bytes;  // the same burst, split by TCP or by the client's writes
      } else {
        sends.push_back(Send{bytes});
      }
      last_send_time = t;
    } else if (dir == "s2c") {
      if (turns.empty()) throw std::runtime_error("line " + std::to_string(number) + ": the server speaks first");
      turns.back().reply += bytes;
    } else {
      throw std::runtime_error("line " + std::to_string(number) + ": unknown dir \"" + dir + "\"");
    }
  }
  return turns;
}

/// A plain TCP connection: bytes out, exactly N bytes in, or silence checked.
class Connection {
 public:
  explicit Connection(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      throw std::runtime_error("connect to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno));
    }
    timeval timeout{.tv_sec = 30, .tv_usec = 0};  // a reply that never comes fails the test instead
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  ~Connection() { ::close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void send(const std::string& bytes) {
    for (std::size_t sent = 0; sent < bytes.size();) {
      ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
      sent += static_cast<std::size_t>(n);
    }
  }

  /// Exactly `count` bytes, or fewer when the store closes the connection or says nothing for 30 s.
  std::string receive(std::size_t count) {
    std::string got(count, '\0');
    std::size_t have = 0;
    while (have < count) {
      ssize_t n = ::recv(fd(), got.data() + have, count - have, 0);
      if (n <= 0) break;
      have += static_cast<std::size_t>(n);
    }
    got.resize(have);
    return got;
  }

  /// Whatever arrives within `window` (nothing, when the store keeps quiet).
  std::string arriving_within(std::chrono::milliseconds window) {
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + window;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left <= 0ms) return got;
      pollfd p{.fd = fd(), .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return got;
      char buffer[4096];
      ssize_t n = ::recv(fd(), buffer, sizeof buffer, 0);
      if (n <= 0) return got + "<closed>";
      got.append(buffer, static_cast<std::size_t>(n));
    }
  }

  /// Everything the store sends after this side stopped writing, up to its end of the connection.
  std::string rest_after_shutdown() {
    ::shutdown(fd(), SHUT_WR);
    std::string rest;
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd(), buffer, sizeof buffer, 0)) > 0;) rest.append(buffer, static_cast<std::size_t>(n));
    return rest;
  }

 private:
  int fd() const { return fd_; }
  int fd_;
};

std::vector<Turn> recorded_turns() {
  std::ifstream file(STORE_RECORDING_211);
  if (!file) throw std::runtime_error(std::string("cannot read the recording ") + STORE_RECORDING_211);
  return turns_of(file);
}

}  // namespace

TEST(StoreReplay, TurnsKeepBurstsTogetherAndSeparateAWaitGivenUp) {
  std::istringstream recording(
      R"({"meta": {}})" "\n"
      R"({"t": 0.0, "dir": "open", "hex": ""})" "\n"
      R"({"t": 0.001, "dir": "c2s", "hex": "0102"})" "\n"
      R"({"t": 0.0011, "dir": "c2s", "hex": "03"})" "\n"
      R"({"t": 0.002, "dir": "s2c", "hex": "00"})" "\n"
      R"({"t": 0.003, "dir": "s2c", "hex": "ff"})" "\n"
      R"({"t": 0.004, "dir": "c2s", "hex": "06"})" "\n"
      R"({"t": 0.304, "dir": "c2s", "hex": "0c"})" "\n"
      R"({"t": 0.305, "dir": "s2c", "hex": "01"})" "\n");
  auto turns = turns_of(recording);
  ASSERT_EQ(turns.size(), 2u);
  ASSERT_EQ(turns[0].sends.size(), 1u);
  EXPECT_EQ(to_hex(turns[0].sends[0].bytes), "010203");
  EXPECT_EQ(to_hex(turns[0].reply), "00ff");
  ASSERT_EQ(turns[1].sends.size(), 2u);
  EXPECT_EQ(turns[1].sends[0].then_silence, 300ms);
  EXPECT_EQ(to_hex(turns[1].sends[1].bytes), "0c");
  EXPECT_EQ(to_hex(turns[1].reply), "01");

  std::istringstream two_connections(R"({"t": 0, "dir": "open", "hex": ""})" "\n" R"({"t": 1, "dir": "open", "hex": ""})");
  EXPECT_THROW(turns_of(two_connections), std::runtime_error);
}

TEST(StoreReplay, PyTorch211ClientGetsPyTorchServersRepliesByteForByte) {
  std::vector<Turn> turns;
  ASSERT_NO_THROW(turns = recorded_turns()) << "the recording is part of the repository: " << STORE_RECORDING_211;
  // Its twelve operations (the recording's "meta") and the validation before them make 19 turns:
  // the client's get() is a WAIT then a GET, and APPEND and MULTI_SET have no reply of their own.
  ASSERT_EQ(turns.size(), 19u) << "not the conversation the recording describes";

  StoreServer server(StoreServerOptions{.host = "127.0.0.1"});
  server.start();
  Connection connection(server.port());
  int waits_given_up = 0;
  for (const Turn& turn : turns) {
    SCOPED_TRACE("the turn at line " + std::to_string(turn.first_line) + " of the recording");
    for (const Send& send : turn.sends) {
      connection.send(send.bytes);
      if (send.then_silence > 0ms) {
        ++waits_given_up;
        EXPECT_EQ(to_hex(connection.arriving_within(send.then_silence)), "")
            << "the store answered a WAIT on a key nobody set, which PyTorch's server kept pending";
      }
    }
    EXPECT_EQ(to_hex(connection.receive(turn.reply.size())), to_hex(turn.reply))
        << "request " << to_hex(turn.sends.front().bytes).substr(0, 80);
  }
  EXPECT_EQ(waits_given_up, 1) << "the recording's WAIT that times out (CANCEL_WAIT after 300 ms)";
  EXPECT_EQ(to_hex(connection.rest_after_shutdown()), "") << "the store sent more than PyTorch's server did";
}

#pragma once
/// Plain blocking HTTP/1.1 for tests of the status endpoint: a GET over TCP or a Unix socket with
/// POSIX sockets and a receive timeout, and raw connections for tests that misbehave on purpose
/// (huge headers, a byte a second, many idle connections). Independent of the code under test.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <map>
#include <regex>
#include <string>

namespace ddprun::testing {

/// A connected socket, closed when it goes; -1 when the connect failed.
class RawConnection {
 public:
  RawConnection() = default;
  explicit RawConnection(int fd) : fd_(fd) {}
  RawConnection(RawConnection&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  RawConnection& operator=(RawConnection&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

  static RawConnection tcp(int port, const char* address = "127.0.0.1") {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, address, &to.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      ::close(fd);
      return RawConnection();
    }
    return RawConnection(fd);
  }
  static RawConnection unix_socket(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un to{};
    to.sun_family = AF_UNIX;
    std::strncpy(to.sun_path, path.c_str(), sizeof(to.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      ::close(fd);
      return RawConnection();
    }
    return RawConnection(fd);
  }

  /// Sends all of `data`; false when the peer is gone.
  bool send(const std::string& data) {
    std::size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  /// Reads until the peer closes or `timeout` passes; what came.
  std::string read_all(std::chrono::milliseconds timeout) {
    set_timeout(timeout);
    std::string got;
    char buffer[65536];
    for (;;) {
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      got.append(buffer, static_cast<std::size_t>(n));
    }
    return got;
  }

  /// Whether the peer closed the connection within `timeout` (reading and dropping what comes).
  bool closed_within(std::chrono::milliseconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (std::chrono::steady_clock::now() < end) {
      set_timeout(std::chrono::milliseconds(100));
      ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n == 0) return true;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;  // reset
    }
    return false;
  }

  void set_timeout(std::chrono::milliseconds timeout) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

 private:
  int fd_ = -1;
};

struct HttpReply {
  int status = 0;  ///< 0: no reply
  std::map<std::string, std::string> headers;  ///< names in lower case
  std::string body;
};

/// Parses one reply that ends where the connection closed.
inline HttpReply parse_http_reply(const std::string& raw) {
  HttpReply reply;
  auto head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos || raw.rfind("HTTP/1.", 0) != 0) return reply;
  reply.status = std::atoi(raw.c_str() + 9);
  std::size_t line = raw.find("\r\n") + 2;
  while (line < head_end) {
    std::size_t next = raw.find("\r\n", line);
    std::string header = raw.substr(line, next - line);
    auto colon = header.find(':');
    if (colon != std::string::npos) {
      std::string name = header.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = header.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      reply.headers[name] = value;
    }
    line = next + 2;
  }
  reply.body = raw.substr(head_end + 4);
  return reply;
}

/// GET `target` on `connection` with `Connection: close` and the extra header lines (each ending in
/// \r\n); the reply, status 0 when none came within `timeout`.
inline HttpReply http_get(RawConnection connection, const std::string& target, const std::string& extra_headers = "",
                          const std::string& host = "127.0.0.1",
                          std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  if (!connection.ok()) return {};
  if (!connection.send("GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n" + extra_headers +
                       "\r\n")) {
    return {};
  }
  return parse_http_reply(connection.read_all(timeout));
}

/// The port of the "ddprun: status at http://HOST:PORT/" line in ddprun's stderr `text`; 0 when
/// not printed (yet).
inline int printed_status_port(const std::string& text) {
  std::smatch match;
  static const std::regex line("ddprun: status at http://[^ ]*:([0-9]+)/\n");
  return std::regex_search(text, match, line) ? std::stoi(match[1]) : 0;
}

}  // namespace ddprun::testing

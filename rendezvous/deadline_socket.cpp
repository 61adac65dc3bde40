#include "rendezvous/deadline_socket.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace ddprun::rendezvous {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;
/// Larger read buffers (left by a large value) are given back after the call that needed them.
constexpr std::size_t kKeptBufferBytes = 1024 * 1024;

std::string describe_io_error(const boost::system::error_code& ec) {
  if (ec == asio::error::eof) return "the store closed the connection";
  if (ec == asio::error::connection_reset) return "the store reset the connection";
  return ec.message();
}

}  // namespace

DeadlineSocket::DeadlineSocket() { buffer_.resize(kReadChunk); }

void DeadlineSocket::connect(const std::string& host, int port, const Deadline& deadline) {
  close();
  boost::system::error_code ec;
  std::vector<tcp::endpoint> endpoints;
  auto ip = asio::ip::make_address(host, ec);
  if (!ec) {
    endpoints.emplace_back(ip, static_cast<unsigned short>(port));
  } else {
    // getaddrinfo cannot be cancelled, so names resolve synchronously (bounded by the resolver's
    // own timeouts); literal addresses, the common case, skip it.
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec) throw CallFailed{"cannot resolve " + host + ": " + ec.message()};
    for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  }
  bool done = false;
  asio::async_connect(socket_, endpoints, [&](const boost::system::error_code& error, const tcp::endpoint&) {
    ec = error;
    done = true;
  });
  run_until(deadline, done);
  if (ec == asio::error::operation_aborted) {
    close();
    throw CallFailed{"connecting timed out", true};
  }
  if (ec) {
    close();
    throw CallFailed{ec.message()};
  }
  // Requests are small and answered one by one: Nagle would add a delay to each.
  socket_.set_option(tcp::no_delay(true), ec);
}

void DeadlineSocket::close() {
  boost::system::error_code ignored;
  socket_.close(ignored);
  begin_ = end_ = 0;
}

bool DeadlineSocket::usable_between_calls() {
  if (begin_ == end_ && buffer_.size() > kKeptBufferBytes) {
    buffer_.resize(kReadChunk);
    buffer_.shrink_to_fit();
  }
  if (socket_.is_open() && begin_ == end_) {
    char byte = 0;
    ssize_t got = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    // EOF, an error, or bytes nobody asked for (out of step): start over.
  }
  return false;
}

void DeadlineSocket::run_until(const Deadline& deadline, const bool& done) {
  io_.restart();
  // interrupt() sets the flag before it stops the loop: a stop that came before this restart() is
  // seen here, one that comes after makes run_until() return at once.
  if (!interrupted_) io_.run_until(deadline.at);
  if (!done) {
    boost::system::error_code ignored;
    socket_.cancel(ignored);
    io_.restart();
    io_.run();
  }
  if (interrupted_) {
    close();
    throw CallFailed{"interrupted"};
  }
}

void DeadlineSocket::interrupt() {
  interrupted_ = true;
  io_.stop();
}

void DeadlineSocket::write_all(std::string_view bytes, const Deadline& deadline) {
  bool done = false;
  boost::system::error_code ec;
  asio::async_write(socket_, asio::buffer(bytes.data(), bytes.size()),
                    [&](const boost::system::error_code& error, std::size_t) {
                      ec = error;
                      done = true;
                    });
  run_until(deadline, done);
  if (!ec) return;
  close();  // a partial request may have gone out: the connection is out of step
  if (ec == asio::error::operation_aborted) {
    throw CallFailed{"timed out after " + describe_duration(deadline.timeout) + " (sending)", true};
  }
  throw CallFailed{describe_io_error(ec)};
}

bool DeadlineSocket::try_fill(std::size_t size, const Deadline& deadline) {
  while (end_ - begin_ < size) {
    make_room(size);
    bool done = false;
    boost::system::error_code ec;
    std::size_t got = 0;
    socket_.async_read_some(asio::buffer(buffer_.data() + end_, buffer_.size() - end_),
                            [&](const boost::system::error_code& error, std::size_t bytes) {
                              ec = error;
                              got = bytes;
                              done = true;
                            });
    run_until(deadline, done);
    end_ += got;
    if (ec == asio::error::operation_aborted) return false;
    if (ec) {
      close();
      throw CallFailed{describe_io_error(ec)};
    }
  }
  return true;
}

void DeadlineSocket::fill(std::size_t size, const Deadline& deadline) {
  if (try_fill(size, deadline)) return;
  close();
  throw CallFailed{"timed out after " + describe_duration(deadline.timeout), true};
}

void DeadlineSocket::make_room(std::size_t size) {
  if (buffer_.size() - begin_ < size || end_ == buffer_.size()) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() < size) buffer_.resize(std::max(size, kReadChunk));
}

const char* DeadlineSocket::take(std::size_t size) {
  const char* data = buffer_.data() + begin_;
  begin_ += size;
  if (begin_ == end_) begin_ = end_ = 0;
  return data;
}

}  // namespace ddprun::rendezvous

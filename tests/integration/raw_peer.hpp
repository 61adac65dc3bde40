#pragma once
// RawPeer: a raw TCP peer of a store, for the server's tests: it sends any bytes, reads replies
// with wire::decode_reply (as the clients do) only when told to, and notices when the server
// closes the connection.
#include <sys/socket.h>
#include <sys/time.h>

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it in C++20

#include <algorithm>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "rendezvous/wire.hpp"

namespace ddprun::testing {

class RawPeer {
 public:
  explicit RawPeer(int port) : socket_(io_) {
    namespace asio = boost::asio;
    socket_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    timeval timeout{.tv_sec = 30, .tv_usec = 0};  // a read that hangs fails the test instead
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }

  void send(std::string_view bytes) { boost::asio::write(socket_, boost::asio::buffer(bytes.data(), bytes.size())); }
  void send(rendezvous::wire::Dialect dialect, const rendezvous::wire::Request& request) {
    send(rendezvous::wire::encode_request(dialect, request));
  }

  /// Sends as much of `bytes` as the server takes until it takes nothing for `quiet`; returns how much.
  std::size_t send_until_refused(std::string_view bytes, std::chrono::milliseconds quiet = std::chrono::seconds(1)) {
    socket_.non_blocking(true);
    std::size_t sent = 0;
    auto last_progress = std::chrono::steady_clock::now();
    while (sent < bytes.size() && std::chrono::steady_clock::now() - last_progress < quiet) {
      boost::system::error_code ec;
      std::size_t n = socket_.write_some(boost::asio::buffer(bytes.data() + sent, bytes.size() - sent), ec);
      if (ec && ec != boost::asio::error::would_block) break;
      if (n > 0) {
        sent += n;
        last_progress = std::chrono::steady_clock::now();
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    socket_.non_blocking(false);
    return sent;
  }

  /// The reply to an `op` request (`keys`: a MULTI_GET's key count). Throws when the reply is
  /// invalid, or when the server closes the connection (or says nothing for 30 s) first.
  rendezvous::wire::Reply read_reply(rendezvous::wire::Op op, std::size_t keys = 0) {
    for (;;) {
      rendezvous::wire::DecodedReply decoded = rendezvous::wire::decode_reply(op, in_, limits_, keys);
      if (decoded.status == rendezvous::wire::DecodeStatus::complete) {
        in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(decoded.consumed));
        return std::move(decoded.reply);
      }
      if (decoded.status == rendezvous::wire::DecodeStatus::invalid) {
        throw std::runtime_error("the store sent an invalid reply: " + decoded.error);
      }
      const std::size_t had = in_.size();
      in_.resize(std::max(decoded.need_at_least, had + 64 * 1024));
      const std::size_t got = socket_.read_some(boost::asio::buffer(in_.data() + had, in_.size() - had));
      in_.resize(had + got);
    }
  }

  /// The value of a GET or COMPARE_SET reply.
  std::string read_value(rendezvous::wire::Op op = rendezvous::wire::Op::get) {
    return std::move(read_reply(op).values.front());
  }

  /// True when the server ends this connection within `timeout`; whatever it sent first is read
  /// and dropped on the way.
  bool closed_by_server(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    socket_.non_blocking(true);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string sink(64 * 1024, '\0');
    bool closed = false;
    while (!closed && std::chrono::steady_clock::now() < deadline) {
      boost::system::error_code ec;
      std::size_t n = socket_.read_some(boost::asio::buffer(sink), ec);
      closed = ec && ec != boost::asio::error::would_block;
      if (!closed && n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    socket_.non_blocking(false);
    in_.clear();
    return closed;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  std::vector<std::uint8_t> in_;  ///< received bytes not yet taken by a reply
  /// Replies of any size the tests provoke (a test's store may have raised its own limits).
  rendezvous::wire::Limits limits_{.max_key_bytes = 1 << 20, .max_value_bytes = std::size_t{1} << 30};
};

}  // namespace ddprun::testing

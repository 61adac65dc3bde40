#include "launcher/observe/status_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "launcher/base/errors.hpp"
#include "rendezvous/endpoint.hpp"

namespace ddprun::launcher {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

namespace {

/// Writes the request and reads the reply on a connected `socket`, within the io_context's run.
template <class Socket>
void exchange(Socket& socket, http::request<http::empty_body>& request, beast::flat_buffer& buffer,
              http::response_parser<http::string_body>& parser, error_code& result) {
  http::async_write(socket, request, [&](const error_code& ec, std::size_t) {
    if (ec) {
      result = ec;
      return;
    }
    http::async_read(socket, buffer, parser, [&](const error_code& read_ec, std::size_t) { result = read_ec; });
  });
}

}  // namespace

std::string StatusAddress::describe() const {
  return unix_socket.empty() ? rendezvous::format_endpoint(host, port) : "unix:" + unix_socket;
}

StatusReply fetch_status(const StatusAddress& address, const std::string& target,
                         const std::optional<std::string>& token, std::chrono::milliseconds timeout) {
  asio::io_context io;
  http::request<http::empty_body> request(http::verb::get, target, 11);
  request.set(http::field::host, address.unix_socket.empty() ? rendezvous::format_endpoint(address.host, address.port)
                                                             : std::string("localhost"));
  request.set(http::field::user_agent, "ddprun");
  request.keep_alive(false);
  if (token && address.unix_socket.empty()) request.set(http::field::authorization, "Bearer " + *token);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxStatusReplyBytes);
  error_code result = asio::error::would_block;  // until an operation ends

  asio::local::stream_protocol::socket unix_socket(io);
  asio::ip::tcp::socket tcp_socket(io);
  asio::ip::tcp::resolver resolver(io);
  if (!address.unix_socket.empty()) {
    unix_socket.async_connect(asio::local::stream_protocol::endpoint(address.unix_socket), [&](const error_code& ec) {
      if (ec) {
        result = ec;
        return;
      }
      exchange(unix_socket, request, buffer, parser, result);
    });
  } else {
    resolver.async_resolve(address.host, std::to_string(address.port), [&](const error_code& ec, auto endpoints) {
      if (ec) {
        result = ec;
        return;
      }
      asio::async_connect(tcp_socket, endpoints, [&](const error_code& connect_ec, const auto&) {
        if (connect_ec) {
          result = connect_ec;
          return;
        }
        exchange(tcp_socket, request, buffer, parser, result);
      });
    });
  }
  io.run_for(timeout);
  if (result == asio::error::would_block) {
    throw LaunchError("the status endpoint at " + address.describe() + " did not answer within " +
                      std::to_string(timeout.count() / 1000) + " s");
  }
  if (result) throw LaunchError("cannot read the status endpoint at " + address.describe() + ": " + result.message());
  StatusReply reply;
  reply.status = static_cast<int>(parser.get().result_int());
  reply.body = std::move(parser.get().body());
  return reply;
}

}  // namespace ddprun::launcher

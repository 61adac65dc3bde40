#include "launcher/port_reservation.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/system/error_code.hpp>

#include "launcher/errors.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ddprun::launcher {
namespace {

tcp::endpoint resolve_local(asio::io_context& io, const std::string& host, int port) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (!ec) return {address, static_cast<unsigned short>(port)};
  tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    throw LaunchError("cannot resolve --master-addr " + host + ": " + ec.message());
  }
  return *results.begin();
}

}  // namespace

PortReservation::PortReservation(asio::io_context& io, const std::string& host, int port)
    : acceptor_(io) {
  tcp::endpoint endpoint = resolve_local(io, host, port);
  boost::system::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  // SO_REUSEADDR as PyTorch's TCPStore sets it: a port in TIME_WAIT is free for it, so for us too.
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec == asio::error::address_in_use) {
    throw LaunchError("port " + std::to_string(port) + " on " + host +
                      " is already in use: choose another with --master-port, or use --standalone");
  }
  if (ec) {
    throw LaunchError("cannot bind port " + std::to_string(port) + " on " + host + ": " + ec.message());
  }
  port_ = acceptor_.local_endpoint().port();
}

int PortReservation::take_socket() { return acceptor_.release(); }

}  // namespace ddprun::launcher

#include "launcher/port_reservation.hpp"

#include <boost/system/error_code.hpp>

#include "common/listen.hpp"
#include "launcher/base/errors.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {

PortReservation::PortReservation(asio::io_context& io, const std::string& host, int port)
    : acceptor_(io) {
  boost::system::error_code ec;
  auto endpoint = common::endpoint_to_bind(io, host, port, ec);
  if (!endpoint) throw LaunchError("cannot resolve --master-addr " + host + ": " + ec.message());
  // Listening, so that the store it is handed to (take_socket) serves on it as it is.
  ec = common::bind_and_listen(acceptor_, *endpoint, asio::socket_base::max_listen_connections);
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

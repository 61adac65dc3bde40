#pragma once
/// PortReservation: a TCP port bound (and listening) on this machine for as long as the object
/// holds it, so that "is the master port free?" is answered by the kernel, not guessed.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <string>

namespace ddprun::launcher {

class PortReservation {
 public:
  /// Binds `host:port` (port 0: a free port the kernel picks). Throws LaunchError naming the port
  /// and the host when it is in use or the host is not an address of this machine.
  PortReservation(boost::asio::io_context& io, const std::string& host, int port);

  int port() const { return port_; }

  /// Hands the listening socket over (to the store that serves on it): the port stays held, with
  /// no moment in which another process could take it. The caller owns the descriptor.
  int take_socket();

 private:
  boost::asio::ip::tcp::acceptor acceptor_;
  int port_ = 0;
};

}  // namespace ddprun::launcher

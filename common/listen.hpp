#pragma once
/// Listening sockets: the one way ddprun binds a TCP port to serve on it (the agent's reservation
/// of its master port, the store servers), so that every listener behaves alike.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <optional>
#include <string>

namespace ddprun::common {

/// The endpoint to bind for `host` and `port` (0: the kernel picks): `host` as an address when it
/// is one, else the first address it resolves to. Nothing, with `error` set, when it resolves to
/// none (`error` may then still be success: the caller's message says "cannot resolve").
std::optional<boost::asio::ip::tcp::endpoint> endpoint_to_bind(boost::asio::io_context& io, const std::string& host,
                                                               int port, boost::system::error_code& error);

/// Opens `acceptor` on `endpoint` and listens with `backlog`: SO_REUSEADDR as PyTorch's TCPStore
/// sets it (a port in TIME_WAIT is free for it, so for us too), and an IPv6 socket takes IPv4
/// peers as well (IPV6_V6ONLY off, whatever the system's default). Returns the error of the first
/// step that failed (address_in_use when the port is taken), or success.
boost::system::error_code bind_and_listen(boost::asio::ip::tcp::acceptor& acceptor,
                                          const boost::asio::ip::tcp::endpoint& endpoint, int backlog);

}  // namespace ddprun::common

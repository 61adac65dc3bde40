#include "rendezvous/peer_probe.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ddprun::rendezvous {

std::vector<std::size_t> unreachable_peers(const std::vector<Endpoint>& peers, std::chrono::milliseconds timeout) {
  asio::io_context io;
  asio::steady_timer timer(io, timeout);
  std::vector<bool> answered(peers.size(), false);
  std::vector<std::unique_ptr<tcp::socket>> sockets;
  std::size_t pending = 0;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    boost::system::error_code ec;
    auto address = asio::ip::make_address(peers[i].host, ec);
    if (ec) continue;  // advertised addresses are numeric; anything else cannot be probed: unreachable
    sockets.push_back(std::make_unique<tcp::socket>(io));
    ++pending;
    sockets.back()->async_connect(tcp::endpoint(address, static_cast<unsigned short>(peers[i].port)),
                                  [&, i](const boost::system::error_code& error) {
                                    if (!error) answered[i] = true;
                                    if (--pending == 0) timer.cancel();
                                  });
  }
  timer.async_wait([&](const boost::system::error_code& error) {
    if (error) return;  // every probe answered first
    for (auto& socket : sockets) {
      boost::system::error_code ignored;
      socket->close(ignored);  // the connects still pending end now, as failures
    }
  });
  if (pending == 0) timer.cancel();
  io.run();
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (!answered[i]) out.push_back(i);
  }
  return out;
}

}  // namespace ddprun::rendezvous

#include "rendezvous/peer_probe.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ddprun::rendezvous {
namespace {

/// What the probes and the coroutine that started them share: the connects' handlers may run after
/// the coroutine has given up on them.
struct Probes {
  explicit Probes(const asio::any_io_executor& executor, std::size_t count)
      : answered(count, false), timer(executor) {}
  std::vector<bool> answered;
  std::vector<std::unique_ptr<tcp::socket>> sockets;
  std::size_t pending = 0;
  asio::steady_timer timer;  ///< the timeout; cancelled early when every probe has answered
};

}  // namespace

Task<std::vector<std::size_t>> unreachable_peers(asio::any_io_executor executor, std::vector<Endpoint> peers,
                                                 std::chrono::milliseconds timeout) {
  auto probes = std::make_shared<Probes>(executor, peers.size());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    boost::system::error_code ec;
    auto address = asio::ip::make_address(peers[i].host, ec);
    if (ec) continue;  // advertised addresses are numeric; anything else cannot be probed: unreachable
    probes->sockets.push_back(std::make_unique<tcp::socket>(executor));
    ++probes->pending;
    probes->sockets.back()->async_connect(tcp::endpoint(address, static_cast<unsigned short>(peers[i].port)),
                                          [probes, i](const boost::system::error_code& error) {
                                            if (!error) probes->answered[i] = true;
                                            if (--probes->pending == 0) probes->timer.cancel();
                                          });
  }
  if (probes->pending > 0) {
    probes->timer.expires_after(timeout);
    boost::system::error_code ec;  // cancelled: every probe answered first
    co_await probes->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (!probes->answered[i]) out.push_back(i);
  }
  for (auto& socket : probes->sockets) {
    boost::system::error_code ignored;
    socket->close(ignored);  // the connects still pending end now, as failures, touching only `probes`
  }
  co_return out;
}

}  // namespace ddprun::rendezvous

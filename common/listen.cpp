#include "common/listen.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/v6_only.hpp>

namespace ddprun::common {

namespace asio = boost::asio;
using asio::ip::tcp;

std::optional<tcp::endpoint> endpoint_to_bind(asio::io_context& io, const std::string& host, int port,
                                              boost::system::error_code& error) {
  error.clear();
  auto address = asio::ip::make_address(host, error);
  if (!error) return tcp::endpoint(address, static_cast<unsigned short>(port));
  error.clear();
  tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port), error);
  if (error || results.empty()) return std::nullopt;
  return results.begin()->endpoint();
}

boost::system::error_code bind_and_listen(tcp::acceptor& acceptor, const tcp::endpoint& endpoint, int backlog) {
  boost::system::error_code error;
  acceptor.open(endpoint.protocol(), error);
  if (!error) acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  if (!error && endpoint.address().is_v6()) acceptor.set_option(asio::ip::v6_only(false), error);
  if (!error) acceptor.bind(endpoint, error);
  if (!error) acceptor.listen(backlog, error);
  return error;
}

}  // namespace ddprun::common

// Peer probes on the caller's event loop: an agent that listens answers, a closed port or an
// address that is not numeric does not; the probe ends as soon as every peer has answered.
#include "rendezvous/peer_probe.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>

#include "tests/support/free_port.hpp"
#include "tests/support/spawn_task.hpp"

using namespace ddprun::rendezvous;
using ddprun::testing::spawn;
using namespace std::chrono_literals;
using boost::asio::ip::tcp;

TEST(PeerProbe, TellsTheAgentsThatAnswerFromThoseThatDoNot) {
  boost::asio::io_context io;
  // A live agent: a listening socket (the kernel completes a probe's handshake into the backlog).
  tcp::acceptor alive(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  const int alive_port = alive.local_endpoint().port();
  const int closed_port = ddprun::testing::free_port();  // nobody listens: refused
  const std::vector<Endpoint> peers = {
      {"127.0.0.1", alive_port}, {"127.0.0.1", closed_port}, {"not-an-address", alive_port}, {"127.0.0.1", alive_port}};
  const auto start = std::chrono::steady_clock::now();
  auto probed = spawn(io, unreachable_peers(io.get_executor(), peers, 30s));
  while (!probed->done) io.run_one();
  EXPECT_EQ(probed->get(), (std::vector<std::size_t>{1, 2}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "every peer answered: no wait for the timeout";
}

TEST(PeerProbe, NoPeersIsAnAnswerAtOnce) {
  boost::asio::io_context io;
  auto probed = spawn(io, unreachable_peers(io.get_executor(), {}, 30s));
  io.run();
  ASSERT_TRUE(probed->done);
  EXPECT_TRUE(probed->get().empty());
}

TEST(PeerProbe, APeerThatDoesNotAnswerIsUnreachableAtTheTimeout) {
  boost::asio::io_context io;
  // A listener whose accept queue is full drops new handshakes: a peer whose machine is gone.
  tcp::acceptor full(io);
  full.open(tcp::v4());
  full.bind(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  full.listen(0);
  const tcp::endpoint at = full.local_endpoint();
  std::vector<std::unique_ptr<tcp::socket>> fillers;
  for (int i = 0; i < 4; ++i) {
    fillers.push_back(std::make_unique<tcp::socket>(io));
    fillers.back()->async_connect(at, [](const boost::system::error_code&) {});
  }
  io.run_for(200ms);
  const auto start = std::chrono::steady_clock::now();
  auto probed = spawn(io, unreachable_peers(io.get_executor(), {{"127.0.0.1", at.port()}}, 300ms));
  while (!probed->done) io.run_one();
  EXPECT_EQ(probed->get(), (std::vector<std::size_t>{0}));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

/// hello_ranks: a worker that proves what ddprun (or torchrun) told it. Every worker checks its
/// torchrun environment for consistency; rank 0 then listens on MASTER_ADDR:MASTER_PORT, every
/// other rank reports to it, and rank 0 checks that exactly ranks 1..WORLD_SIZE-1 of the same job
/// arrived. Exits non-zero on any inconsistency, so a wrong environment cannot pass.
#include <unistd.h>

#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it in C++20

#include <boost/asio.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string required(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) throw std::runtime_error(std::string("environment variable ") + name + " is not set");
  return value;
}

int required_int(const char* name) {
  std::string text = required(name);
  std::size_t used = 0;
  int value = std::stoi(text, &used);
  if (used != text.size()) throw std::runtime_error(std::string(name) + "=" + text + " is not an integer");
  return value;
}

struct Identity {
  int rank, local_rank, world_size, local_world_size, group_rank, restart_count;
  std::string run_id, master_addr;
  int master_port;
};

Identity read_identity() {
  Identity id{required_int("RANK"),        required_int("LOCAL_RANK"), required_int("WORLD_SIZE"),
              required_int("LOCAL_WORLD_SIZE"), required_int("GROUP_RANK"), required_int("TORCHELASTIC_RESTART_COUNT"),
              required("TORCHELASTIC_RUN_ID"), required("MASTER_ADDR"), required_int("MASTER_PORT")};
  auto check = [](bool ok, const std::string& what) {
    if (!ok) throw std::runtime_error("inconsistent environment: " + what);
  };
  check(0 <= id.rank && id.rank < id.world_size, "RANK outside [0, WORLD_SIZE)");
  check(0 <= id.local_rank && id.local_rank < id.local_world_size, "LOCAL_RANK outside [0, LOCAL_WORLD_SIZE)");
  check(id.local_world_size <= id.world_size, "LOCAL_WORLD_SIZE > WORLD_SIZE");
  check(id.rank == id.group_rank * id.local_world_size + id.local_rank,
        "RANK != GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK");
  check(required("ROLE_RANK") == std::to_string(id.rank), "ROLE_RANK != RANK");
  check(id.master_port > 0 && id.master_port < 65536, "MASTER_PORT out of range");
  return id;
}

std::string report_of(const Identity& id) {
  std::ostringstream line;
  line << id.rank << ' ' << id.local_rank << ' ' << id.world_size << ' ' << id.run_id << ' ' << ::getpid() << '\n';
  return line.str();
}

/// Rank 0: accept one report from every other rank, check them, answer each.
void gather_reports(const Identity& id) {
  asio::io_context io;
  tcp::acceptor acceptor(io);
  tcp::endpoint endpoint(asio::ip::make_address(id.master_addr), static_cast<unsigned short>(id.master_port));
  acceptor.open(endpoint.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen();
  std::map<int, std::string> reports{{0, report_of(id)}};
  std::vector<tcp::socket> peers;
  while (static_cast<int>(reports.size()) < id.world_size) {
    tcp::socket peer = acceptor.accept();
    asio::streambuf buffer;
    asio::read_until(peer, buffer, '\n');
    std::istream in(&buffer);
    int rank = -1, local_rank = -1, world_size = -1;
    std::string run_id, pid;
    in >> rank >> local_rank >> world_size >> run_id >> pid;
    if (world_size != id.world_size || run_id != id.run_id || rank <= 0 || rank >= id.world_size ||
        reports.contains(rank)) {
      throw std::runtime_error("unexpected report from a peer: rank " + std::to_string(rank) + " of world " +
                               std::to_string(world_size) + ", job " + run_id);
    }
    reports[rank] = std::to_string(rank) + " " + std::to_string(local_rank) + " " + pid;
    peers.push_back(std::move(peer));
  }
  for (auto& peer : peers) asio::write(peer, asio::buffer(std::string("ok\n")));
  std::cout << "rank 0: all " << id.world_size << " ranks of job " << id.run_id << " reported (attempt "
            << id.restart_count << ")" << std::endl;
}

/// Other ranks: report to rank 0 (which may not listen yet) and wait for its answer.
void report_to_rank0(const Identity& id) {
  asio::io_context io;
  tcp::endpoint endpoint(asio::ip::make_address(id.master_addr), static_cast<unsigned short>(id.master_port));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  tcp::socket socket(io);
  for (;;) {
    boost::system::error_code ec;
    socket.connect(endpoint, ec);
    if (!ec) break;
    socket.close();
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("rank 0 at " + id.master_addr + ":" + std::to_string(id.master_port) +
                               " did not answer within 60 s: " + ec.message());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  asio::write(socket, asio::buffer(report_of(id)));
  asio::streambuf answer;
  asio::read_until(socket, answer, '\n');
  std::cout << "rank " << id.rank << " (local " << id.local_rank << ") of " << id.world_size << ": confirmed by rank 0"
            << std::endl;
}

}  // namespace

int main() {
  try {
    Identity id = read_identity();
    if (id.rank == 0) {
      gather_reports(id);
    } else {
      report_to_rank0(id);
    }
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "hello_ranks: " << error.what() << std::endl;
    return 1;
  }
}

#include "launcher/signal_origin.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/read.hpp>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>

namespace ddprun::launcher {
namespace {

// What the handler needs, set before the handlers are installed and cleared after they are gone.
std::atomic<int> g_write_fd{-1};
std::atomic<pid_t> g_owner{0};

void record_signal(int signo, siginfo_t* info, void*) {
  const int saved_errno = errno;
  // Between fork and exec a worker still has this handler: its signals are its own, not the agent's.
  if (::getpid() == g_owner.load()) {
    SignalOrigin origin;
    origin.signo = signo;
    origin.code = info->si_code;
    origin.sender = info->si_code <= 0 ? info->si_pid : 0;
    // Smaller than PIPE_BUF: written whole or not at all (a full pipe drops it; thousands pending).
    [[maybe_unused]] auto n = ::write(g_write_fd.load(), &origin, sizeof origin);
  }
  errno = saved_errno;
}

}  // namespace

std::string process_name(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

std::string own_cgroups() {
  std::ifstream file("/proc/self/cgroup");
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

SignalOriginSet::SignalOriginSet(boost::asio::io_context& io, const std::vector<int>& signals, Handler on_signal)
    : on_signal_(std::move(on_signal)), reader_(io) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  reader_.assign(fds[0]);
  write_end_ = UniqueFd(fds[1]);
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, write_end_.get())) {
    throw std::logic_error("SignalOriginSet: one at a time");
  }
  g_owner = ::getpid();
  for (int signo : signals) {
    struct sigaction action {};
    action.sa_sigaction = record_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    ::sigfillset(&action.sa_mask);
    struct sigaction old {};
    if (::sigaction(signo, &action, &old) == 0) previous_.emplace_back(signo, old);
  }
  read_next();
}

SignalOriginSet::~SignalOriginSet() {
  for (const auto& [signo, old] : previous_) ::sigaction(signo, &old, nullptr);
  g_write_fd = -1;
}

void SignalOriginSet::read_next() {
  boost::asio::async_read(reader_, boost::asio::buffer(&incoming_, sizeof incoming_),
                          [this](const boost::system::error_code& ec, std::size_t) {
                            if (ec) return;  // the set is going
                            on_signal_(incoming_);
                            read_next();
                          });
}

}  // namespace ddprun::launcher

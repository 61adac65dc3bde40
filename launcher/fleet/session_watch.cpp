#include "launcher/fleet/session_watch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/read.hpp>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "launcher/base/errors.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {

std::optional<std::chrono::milliseconds> session_watch_timeout(const Environ& env) {
  auto value = lookup(env, std::string(kSessionWatchVariable));
  if (!value || value->empty()) return std::nullopt;
  char* end = nullptr;
  double seconds = std::strtod(value->c_str(), &end);
  if (end == value->c_str() || *end != '\0' || !std::isfinite(seconds) || seconds <= 0 || seconds > 86400) {
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

SessionWatch::SessionWatch(asio::io_context& io, int fd, std::chrono::milliseconds timeout,
                           std::function<void(const std::string&)> ended)
    : in_(io), timer_(io), timeout_(timeout), last_heard_(std::chrono::steady_clock::now()), ended_(std::move(ended)) {
  int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) throw LaunchError(std::string("cannot watch the launcher's session on stdin: ") + std::strerror(errno));
  in_.assign(copy);
  read();
  arm();
}

SessionWatch::~SessionWatch() {
  boost::system::error_code ignored;
  timer_.cancel();
  in_.close(ignored);
}

void SessionWatch::read() {
  in_.async_read_some(asio::buffer(buffer_), [this](const boost::system::error_code& ec, std::size_t) {
    if (ec == asio::error::operation_aborted || done_) return;
    if (ec) {
      end("the launching ddprun's session ended (" +
          std::string(ec == asio::error::eof ? "its ssh connection closed" : ec.message()) + "); stopping the workers");
      return;
    }
    last_heard_ = std::chrono::steady_clock::now();
    read();
  });
}

void SessionWatch::arm() {
  timer_.expires_at(last_heard_ + timeout_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || done_) return;
    if (std::chrono::steady_clock::now() - last_heard_ >= timeout_) {
      const auto ms = timeout_.count();
      std::string span = ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
      end("nothing heard from the launching ddprun for " + span + " (a link down?); stopping the workers");
      return;
    }
    arm();
  });
}

void SessionWatch::end(const std::string& why) {
  done_ = true;
  boost::system::error_code ignored;
  timer_.cancel();
  in_.cancel(ignored);
  ended_(why);
}

std::unique_ptr<SessionWatch> watch_session(asio::io_context& io, const Environ& env,
                                            std::function<void(const std::string&)> ended) {
  auto timeout = session_watch_timeout(env);
  if (!timeout) return nullptr;
  return std::make_unique<SessionWatch>(io, STDIN_FILENO, *timeout, std::move(ended));
}

}  // namespace ddprun::launcher

#pragma once
/// SessionWatch: an agent started over ssh by a launching ddprun (--hostfile, -H) notices that the
/// launcher is gone, so that no worker outlives it on a remote host. The launcher holds the agent's
/// stdin (ssh's) and writes a keep-alive byte every second: end of file (ssh ended, the launcher
/// closed it to stop the job) or silence for the timeout (a cut link, where TCP never closes and
/// sshd keeps the session) ends the session. One read and one timer on the agent's loop; never blocks.
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/base/environ.hpp"

namespace ddprun::launcher {

/// The variable the launcher sets on each remote agent: the keep-alive timeout in seconds.
inline constexpr std::string_view kSessionWatchVariable = "DDPRUN_SESSION_WATCH";

/// DDPRUN_SESSION_WATCH's timeout; nothing when unset, empty or not a number of seconds > 0.
std::optional<std::chrono::milliseconds> session_watch_timeout(const Environ& env);

class SessionWatch {
 public:
  /// Watches `fd` (duplicated; the caller's stays open); `ended(why)` once, on the loop.
  SessionWatch(boost::asio::io_context& io, int fd, std::chrono::milliseconds timeout,
               std::function<void(const std::string&)> ended);
  ~SessionWatch();
  SessionWatch(const SessionWatch&) = delete;
  SessionWatch& operator=(const SessionWatch&) = delete;

 private:
  void read();
  void arm();
  void end(const std::string& why);

  boost::asio::posix::stream_descriptor in_;
  boost::asio::steady_timer timer_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point last_heard_;
  std::function<void(const std::string&)> ended_;
  std::array<char, 256> buffer_{};
  bool done_ = false;
};

/// A SessionWatch on stdin when `env` asks for one (kSessionWatchVariable), else null.
std::unique_ptr<SessionWatch> watch_session(boost::asio::io_context& io, const Environ& env,
                                            std::function<void(const std::string&)> ended);

}  // namespace ddprun::launcher

#pragma once
/// Signals with their sender. Asio's signal_set says which signal came, not who sent it; deciding
/// whether to pass a signal on to the workers needs the sender (si_pid), so these signals are
/// caught with an SA_SIGINFO handler that writes what the kernel said into a pipe read on the loop.
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <csignal>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/base/unique_fd.hpp"

namespace ddprun::launcher {

/// One delivery, as the kernel described it.
struct SignalOrigin {
  int signo = 0;
  int code = 0;      ///< si_code: SI_USER (kill), SI_QUEUE (sigqueue), SI_TKILL (tgkill); > 0 from the kernel
  pid_t sender = 0;  ///< si_pid for the codes a process sends (<= 0); 0 otherwise
};

/// Whether `origin` was sent by a process (kill, sigqueue, tgkill), so that `sender` names it.
inline bool sent_by_a_process(const SignalOrigin& origin) { return origin.code <= 0 && origin.sender > 0; }

/// The command name of process `pid` (/proc/PID/comm, at most 15 characters); empty when it is gone.
std::string process_name(pid_t pid);

/// /proc/self/cgroup's text: this process's cgroups, one "ID:CONTROLLERS:PATH" line each.
std::string own_cgroups();

/// Catches `signals` while it lives and calls `on_signal` on the loop for each delivery (the kernel
/// merges deliveries of one signal that arrive while it is pending, as for any handler). One at a
/// time per process. A child between fork and exec that gets one of these signals ignores it
/// rather than report it as the agent's.
class SignalOriginSet {
 public:
  using Handler = std::function<void(const SignalOrigin&)>;
  SignalOriginSet(boost::asio::io_context& io, const std::vector<int>& signals, Handler on_signal);
  ~SignalOriginSet();  ///< restores the dispositions it replaced
  SignalOriginSet(const SignalOriginSet&) = delete;
  SignalOriginSet& operator=(const SignalOriginSet&) = delete;

 private:
  void read_next();

  Handler on_signal_;
  std::vector<std::pair<int, struct sigaction>> previous_;
  UniqueFd write_end_;
  boost::asio::posix::stream_descriptor reader_;
  SignalOrigin incoming_;
};

}  // namespace ddprun::launcher

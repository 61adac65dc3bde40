#include "launcher/base/safe_kill.hpp"

#include <signal.h>

#include <cerrno>

namespace ddprun::launcher {

bool signal_process(pid_t pid, int signo) {
  if (!is_signalable(pid)) {
    errno = EINVAL;
    return false;
  }
  return ::kill(pid, signo) == 0;
}

bool signal_process_group(pid_t pgid, int signo) {
  if (!is_signalable(pgid)) {
    errno = EINVAL;
    return false;
  }
  return ::kill(-pgid, signo) == 0;
}

}  // namespace ddprun::launcher

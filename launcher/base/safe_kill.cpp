#include "launcher/base/safe_kill.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

// The same numbers on every architecture since Linux 5.3 (the generic syscall table); older kernel
// headers lack the names.
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

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

UniqueFd pin_process(pid_t pid) {
  if (!is_signalable(pid)) {
    errno = EINVAL;
    return UniqueFd();
  }
  // The raw syscall: glibc has a wrapper only from 2.36 on. A pidfd is close-on-exec by itself.
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
}

bool signal_pinned(const UniqueFd& pin, int signo) {
  if (pin.get() < 0) {
    errno = EBADF;
    return false;
  }
  return ::syscall(SYS_pidfd_send_signal, pin.get(), signo, nullptr, 0) == 0;
}

}  // namespace ddprun::launcher

#pragma once
/// The only way the launcher sends signals. kill(2) with pid 1 signals init, with -1 every process
/// the caller may signal, and with 0 or -1 as a group the caller's own group: one bad pid (a failed
/// spawn reports -1) would take the machine down. These refuse every pid <= 1 before the syscall.
///
/// A pid names a process only until that process is reaped; then the kernel may give it to any new
/// one. Where a pid comes from an older look (a status sample) rather than from a child the caller
/// has not reaped yet, pin the process first (pin_process: a pidfd) and check what it is through
/// /proc; a signal sent through the pin reaches that process or, once it has ended, none.
#include <sys/types.h>

#include "launcher/base/unique_fd.hpp"

namespace ddprun::launcher {

/// Whether `pid` may be the target of a signal from the launcher: a real process other than init.
constexpr bool is_signalable(pid_t pid) { return pid > 1; }

/// kill(pid, signo); false (errno EINVAL) without a syscall when `pid` is not signalable.
bool signal_process(pid_t pid, int signo);

/// kill(-pgid, signo): every process of group `pgid`; refused like signal_process.
bool signal_process_group(pid_t pgid, int signo);

/// pidfd_open(pid) (Linux 5.3): the process that has `pid` now, held for as long as the fd is
/// open. An fd of -1 with errno set: EINVAL for a pid that is not signalable, ESRCH when there is
/// no such process, ENOSYS on an older kernel.
UniqueFd pin_process(pid_t pid);

/// pidfd_send_signal(pin, signo): false (errno ESRCH) when the pinned process has ended.
bool signal_pinned(const UniqueFd& pin, int signo);

}  // namespace ddprun::launcher

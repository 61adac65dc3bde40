#pragma once
/// The only way the launcher sends signals. kill(2) with pid 1 signals init, with -1 every process
/// the caller may signal, and with 0 or -1 as a group the caller's own group: one bad pid (a failed
/// spawn reports -1) would take the machine down. These refuse every pid <= 1 before the syscall.
#include <sys/types.h>

namespace ddprun::launcher {

/// Whether `pid` may be the target of a signal from the launcher: a real process other than init.
constexpr bool is_signalable(pid_t pid) { return pid > 1; }

/// kill(pid, signo); false (errno EINVAL) without a syscall when `pid` is not signalable.
bool signal_process(pid_t pid, int signo);

/// kill(-pgid, signo): every process of group `pgid`; refused like signal_process.
bool signal_process_group(pid_t pgid, int signo);

}  // namespace ddprun::launcher

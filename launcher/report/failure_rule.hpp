#pragma once
/// Which worker exits are failures of their own, as opposed to the end ddprun gave them. When
/// several workers fail at about the same time, ddprun reacts to the first before the others are
/// reaped: those exits still belong in the summary (torchrun lists every failed worker), while a
/// worker that died of ddprun's own stop does not.
#include <signal.h>

namespace ddprun::launcher {

/// `exitcode` in torchrun's convention (-N: killed by signal N). `stop_signal_sent`: the signal
/// ddprun had sent the worker when it exited (0: none); `kill_sent`: ddprun had also sent SIGKILL
/// (the grace ran out, or a second Ctrl-C).
constexpr bool failed_on_its_own(int exitcode, int stop_signal_sent, bool kill_sent) {
  if (exitcode == 0) return false;
  // The ends ddprun's own signals explain, also as a shell reports them (128+N) for a wrapped child.
  auto died_of = [exitcode](int signo) { return exitcode == -signo || exitcode == 128 + signo; };
  if (stop_signal_sent != 0 && died_of(stop_signal_sent)) return false;
  if (kill_sent && died_of(SIGKILL)) return false;
  return true;
}

}  // namespace ddprun::launcher

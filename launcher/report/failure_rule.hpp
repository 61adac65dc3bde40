#pragma once
/// Which worker exits are failures of their own, as opposed to the end ddprun gave them. When
/// several workers fail at about the same time, ddprun reacts to the first before the others are
/// reaped: those exits still belong in the summary (torchrun lists every failed worker), while a
/// worker that died of ddprun's own stop does not.
///
/// "About the same time" is made a rule by kSameMoment: a failure that ends the job holds ddprun's
/// stop signal to the other workers that long, so that a worker failing at the same moment (two
/// ranks raising the same exception, 5 ms apart) ends by its own failure, not by ddprun's signal,
/// and is listed. A failure that is restarted from is not held: a restart stays as fast as it was.
#include <signal.h>

#include <chrono>

namespace ddprun::launcher {

/// How long a failure that ends the job holds the stop of the others: torchrun's monitor interval
/// (2.x's default), the moment its poll groups failures in. The failure itself is recorded, and told
/// to the other nodes, at once; only the others' SIGTERM waits, and only until they have all exited.
inline constexpr std::chrono::milliseconds kSameMoment{100};

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

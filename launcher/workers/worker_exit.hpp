#pragma once
/// WorkerExit: how one worker of the group ended, as the worker group reports it.
#include <sys/types.h>

#include <chrono>

namespace ddprun::launcher {

struct WorkerExit {
  int local_rank = 0;
  pid_t pid = 0;
  int exitcode = 0;  ///< torchrun's convention: exit status, or -N when killed by signal N
  std::chrono::system_clock::time_point time;
  /// What ddprun had sent the worker when it exited: its stop signal (0: none), and SIGKILL.
  int stop_signal_sent = 0;
  bool kill_sent = false;
};

}  // namespace ddprun::launcher

#pragma once
/// The launcher's one error model: everything it throws for a user to read derives from
/// launcher::Error. One place (exit_status.hpp) turns these, the rendezvous layer's errors and the
/// system's into one line on stderr and the exit status of the architecture page.
#include <stdexcept>
#include <string>

namespace ddprun::launcher {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A bad flag, value or program: exit status 2, raised before any worker starts (by the command
/// line and the program's resolution; nothing after them raises it).
struct UsageError : Error {
  using Error::Error;
};

/// The job could not run or failed (port in use, spawn failed, workers failed): exit status 1.
struct LaunchError : Error {
  using Error::Error;
};

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitJobFailed = 1;
inline constexpr int kExitUsage = 2;
/// ddprun itself was ended by signal N after stopping its workers.
inline constexpr int exit_status_for_signal(int signo) { return 128 + signo; }

}  // namespace ddprun::launcher

#pragma once
/// The two kinds of expected failure of the launcher. `main` turns each into one line on
/// stderr and the exit status of the architecture page.
#include <stdexcept>
#include <string>

namespace ddprun::launcher {

/// A bad flag, value or program: exit status 2, raised before any worker starts.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The job could not run or failed (port in use, spawn failed, workers failed): exit status 1.
struct LaunchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitJobFailed = 1;
inline constexpr int kExitUsage = 2;
/// ddprun itself was ended by signal N after stopping its workers.
inline constexpr int exit_status_for_signal(int signo) { return 128 + signo; }

}  // namespace ddprun::launcher

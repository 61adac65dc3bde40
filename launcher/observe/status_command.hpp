#pragma once
/// `ddprun status [--json] [RUN_ID|PID|LOG_DIR|HOST:PORT]` and `ddprun stacks [...]`: find a running
/// job of this user and print its status table (or the raw /api/status JSON with --json), or
/// every rank's stacks with their digest. main() dispatches here when the first argument is
/// `status` or `stacks`, before the launcher's own command line is read.
///
/// Which job: with an argument, the registered run (run_registry.hpp) it names by run id, agent
/// pid, run folder or --log-dir; a LOG_DIR not registered (another XDG_RUNTIME_DIR) by the
/// status.sock in it; HOST:PORT or http://HOST:PORT/ a TCP endpoint (--status-port), with the
/// store token from DDPRUN_STORE_TOKEN[_FILE] when set. Without one, the only running job of this
/// user; when there are several, they are listed with how to pick one.
#include <string>
#include <vector>

#include "launcher/base/environ.hpp"

namespace ddprun::launcher {

/// Whether `args` (ddprun's arguments) start with a sub-command handled here.
bool is_status_command(const std::vector<std::string>& args);

/// Runs it: prints to stdout, returns the exit status (0 done, 1 the job could not be reached,
/// 2 usage: a bad option or an ambiguous choice, listed on stderr). Throws UsageError and
/// LaunchError for main to report.
int run_status_command(const std::vector<std::string>& args, const Environ& env);

}  // namespace ddprun::launcher

#pragma once
/// The launching side of a job over ssh (--hostfile, -H): one ddprun starts every host's agent
/// with OpenSSH and stands for the whole job on this console.
///
/// One ssh session per host, all at once, each running the gated command (ssh_command.hpp): the
/// pre-flight's checks (the launching folder, ddprun at the launcher's own path), a ready line, a
/// wait for the go, then `exec env VARS ddprun FLAGS -- PROGRAM ARGS` (fleet_config.hpp). The go
/// goes out once every host is ready; a host that is not (ssh failed, a check failed, silence past
/// ConnectTimeout + 10 s) is named on a line of its own and nothing starts anywhere (exit
/// kExitHostsUnreachable). After the go, every stdout and stderr line reaches the console prefixed
/// with its host, and each ssh's stdin carries a keep-alive byte a second to its agent's session
/// watch (session_watch.hpp); closing it stops that agent's workers. Ctrl-C, SIGTERM, SIGHUP or a
/// node that fails closes them all; an ssh still running when the agents' grace (--shutdown-timeout)
/// is over is ended. One event loop; nothing blocks.
#include "launcher/base/environ.hpp"
#include "launcher/cli/launch_config.hpp"

namespace ddprun::launcher {

/// Runs the job on config.fleet.hosts to its end; returns ddprun's exit status (fleet_rule.hpp).
int run_fleet(const LaunchConfig& config, const Environ& env);

}  // namespace ddprun::launcher

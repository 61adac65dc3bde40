#pragma once
/// The launching side of a job over ssh (--hostfile, -H): one ddprun starts every host's agent
/// with OpenSSH and stands for the whole job on this console.
///
/// First a pre-flight, every host at once: ssh connects (BatchMode, ConnectTimeout), finds the
/// launching folder and ddprun at the launcher's own path; every host that fails is named on a line
/// of its own and nothing starts (exit kExitHostsUnreachable). Then one `ssh HOST 'cd CWD && exec
/// env VARS ddprun FLAGS -- PROGRAM ARGS'` per host (fleet_config.hpp, ssh_command.hpp), whose
/// stdout and stderr lines reach the console prefixed with the host. Each ssh's stdin carries a
/// keep-alive byte a second to its agent's session watch (session_watch.hpp); closing it stops that
/// agent's workers. Ctrl-C, SIGTERM, SIGHUP or a node that fails closes them all; an ssh still
/// running when the agents' grace (--shutdown-timeout) is over is ended. One event loop; nothing blocks.
#include "launcher/environ.hpp"
#include "launcher/launch_config.hpp"

namespace ddprun::launcher {

/// Runs the job on config.fleet.hosts to its end; returns ddprun's exit status (fleet_rule.hpp).
int run_fleet(const LaunchConfig& config, const Environ& env);

}  // namespace ddprun::launcher

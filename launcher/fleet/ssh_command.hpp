#pragma once
/// What the launching ddprun hands to OpenSSH: the ssh argv for one host and the remote shell
/// command (the same folder, the exported environment, the agent's own argv), quoted so that any
/// byte but NUL arrives as it was. Pure: values in, argv out.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/base/environ.hpp"

namespace ddprun::launcher {

/// How ssh is run: the flags of --ssh-port / --ssh-option and the DDPRUN_SSH_* timings.
struct SshSettings {
  int port = 0;                      ///< --ssh-port; 0 = ssh's own (its config, else 22)
  std::vector<std::string> options;  ///< --ssh-option values, each `Key=Value`, passed as `-o`
  int connect_timeout_s = 10;        ///< DDPRUN_SSH_CONNECT_TIMEOUT: ssh's ConnectTimeout
  /// DDPRUN_SSH_ALIVE_TIMEOUT: silence after which either side takes the other for gone: ssh's
  /// ServerAliveInterval x ServerAliveCountMax, and the remote agent's session watch.
  int alive_timeout_s = 10;
};

/// `word` as one POSIX shell word: single quotes, each `'` as `'\''`. Words of safe characters
/// only (letters, digits, `_-./=:@%+,`) stay as they are, for readable -v output.
std::string shell_quote(std::string_view word);

/// The ssh destination of a host: `host_address` with the user kept (`u@[::1]` -> `u@::1`).
std::string ssh_destination(std::string_view destination);

/// `ssh OPTIONS -- DESTINATION REMOTE_COMMAND`. The user's --ssh-option values come first (ssh
/// keeps the first value of an option, so they win), then BatchMode=yes (never a prompt),
/// ConnectTimeout, ServerAlive* (a cut link ends ssh) and -T (no terminal: plain pipes).
std::vector<std::string> ssh_argv(const SshSettings& settings, std::string_view destination,
                                  const std::string& remote_command);

/// What runs on a host: `cd CWD && exec env NAME=VALUE... ARGV...`, for a POSIX login shell.
struct RemoteCommand {
  std::string cwd;
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> argv;  ///< argv[0]: the program's path
};
std::string remote_shell_command(const RemoteCommand& command);

/// Variables exported to every host unless --env-export names others too. DDPRUN_STORE_TOKEN and
/// DDPRUN_STORE_TOKEN_FILE never are: the token travels on the go line (go_line).
inline constexpr std::string_view kDefaultExports[] = {"PATH", "PYTHONPATH", "VIRTUAL_ENV"};

/// The variables of `names` (plus kDefaultExports) that `env` sets, in the order named, once each;
/// then every PET_* variable but the fleet's own (PET_HOSTFILE, PET_HOSTS, ...: an agent must not
/// launch a fleet), so that options set by PET_* here hold on every host as they would for a local
/// job (each host's own flags still win: the command line beats PET_*).
std::vector<std::pair<std::string, std::string>> exported_environment(const Environ& env,
                                                                      const std::vector<std::string>& names);

/// --env-export's value: comma-separated variable names (letters, digits, '_', not starting with a
/// digit). Throws UsageError naming `label` for anything else.
std::vector<std::string> parse_export_names(std::string_view text, std::string_view label);

/// The exit statuses of a host that fails the pre-flight's checks (gated_remote_command).
inline constexpr int kPreflightNoFolder = 3;
inline constexpr int kPreflightNoProgram = 4;
/// The line a host prints on stdout once its checks passed; it then waits for a line on its stdin.
inline constexpr std::string_view kReadyLine = "ddprun-ssh-ready";

/// The pre-flight and the launch in one ssh session: `cd CWD` (else exit kPreflightNoFolder),
/// argv[0] executable there (else kPreflightNoProgram), kReadyLine, then a wait for one line on
/// stdin (the launcher's go, once every host is ready; end of file instead: exit 0, nothing
/// started), then `exec env VARS ARGV...`. One login per host instead of two. A go line that
/// carries the store token ("go TOKEN", go_line) exports it as DDPRUN_STORE_TOKEN.
std::string gated_remote_command(const RemoteCommand& command);

/// The launcher's go: "go\n", or "go TOKEN\n" so that every host's agent (and its workers) use
/// the job's store token without it on any command line. UsageError for a token with a line break.
std::string go_line(const std::optional<std::string>& store_token);

/// The pre-flight's verdict on one host from ssh's exit status and what it printed on stderr:
/// empty when the host is usable, else the reason, e.g. "unreachable: ssh: connect to host h port
/// 22: Connection refused". (255 is ssh's own failure; its last stderr line says which.)
std::string preflight_verdict(int status, std::string_view ssh_stderr, const std::string& cwd,
                              const std::string& program);

}  // namespace ddprun::launcher

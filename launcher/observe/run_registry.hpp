#pragma once
/// Where a user's running jobs can be found from another terminal (`ddprun status`, `ddprun
/// stacks`): each agent writes one small JSON file, `<pid>.json`, into this user's registry folder
/// while it runs (its run id, log folder, status socket, status URL) and removes it at the end.
///
/// The folder is `$XDG_RUNTIME_DIR/ddprun` when XDG_RUNTIME_DIR names a folder of this user that
/// no one else may enter (as systemd makes /run/user/UID), else `/tmp/ddprun-UID`. Either is
/// created mode 0700 and refused when it is not a real folder of this user closed to others (a
/// folder another user made in /tmp first must not receive our sockets).
///
/// Each agent serves its status on a Unix socket: `<run folder>/status.sock` when that path fits a
/// socket address (107 bytes), else `<registry folder>/<pid>.sock`.
///
/// An entry whose process is gone (a SIGKILLed agent) is ignored and removed by the next reader;
/// the process's start time, recorded in the entry, tells a reused pid from the agent.
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/base/environ.hpp"

namespace ddprun::launcher {

struct RunEntry {
  std::string run_id;
  pid_t pid = 0;
  std::uint64_t start_ticks = 0;  ///< the process's start time (/proc/PID/stat field 22)
  std::string host;
  std::string run_dir;   ///< the run's log folder, <log_dir>/<run_id>_<random>
  std::string socket;    ///< the status endpoint's Unix socket
  std::string url;       ///< http://HOST:PORT/ when --status-port serves on TCP; empty otherwise
  double started_at = 0;  ///< unix time
  std::string command;   ///< the program and its arguments, for the list of runs
};

nlohmann::json to_json(const RunEntry& entry);
/// Throws nlohmann::json::exception on a shape that is not an entry.
RunEntry run_entry_from_json(const nlohmann::json& json);

/// The registry folder for `env` and this user (not created): see above. `xdg_usable` says whether
/// XDG_RUNTIME_DIR qualifies (checked by the caller: it exists, is ours, mode 0700).
std::filesystem::path registry_folder(const Environ& env, uid_t uid, bool xdg_usable);

/// The registry folder of this process's user, created when missing and checked. Throws
/// LaunchError naming the folder and what is wrong with it.
std::filesystem::path open_registry_folder(const Environ& env);

/// The status socket's path for a run folder (see above). Pure.
std::string status_socket_path(const std::filesystem::path& run_dir, const std::filesystem::path& registry,
                               pid_t pid);

/// The runs registered in `folder` whose agent is still running; the others' entries are removed.
/// Unreadable or foreign files are skipped.
std::vector<RunEntry> registered_runs(const std::filesystem::path& folder);

/// The runs `argument` names: a run id, an agent's pid, a run folder, or the --log-dir a run
/// folder is in. Pure; every match, in the order given.
std::vector<RunEntry> runs_named(const std::vector<RunEntry>& runs, std::string_view argument);

/// The start time of process `pid` in clock ticks since boot, from /proc; nothing when it is gone.
std::optional<std::uint64_t> process_start_ticks(pid_t pid);

/// This agent's entry in the registry for as long as it lives: written (atomically) by the
/// constructor, removed by the destructor.
class RunRegistration {
 public:
  /// Throws LaunchError when the entry cannot be written.
  RunRegistration(std::filesystem::path folder, RunEntry entry);
  ~RunRegistration();
  RunRegistration(const RunRegistration&) = delete;
  RunRegistration& operator=(const RunRegistration&) = delete;

  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
};

}  // namespace ddprun::launcher

#pragma once
/// How each worker process is started: the interpreter or executable to exec and its argv.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "environ.hpp"
#include "launch_config.hpp"

namespace ddprun::launcher {

struct WorkerCommand {
  std::string executable;         ///< absolute path handed to execve
  std::vector<std::string> argv;  ///< argv[0] is what the program sees as its name
};

/// Resolves how each worker is started, from config.mode:
/// - python_script: {PYTHON, "-u", PROGRAM, ARGS...}; PROGRAM must exist and be readable.
/// - python_module: {PYTHON, "-u", "-m", PROGRAM, ARGS...}.
/// - executable: {PROGRAM as typed, ARGS...}, exec'd from find_program's path.
/// PYTHON is $PYTHON_EXEC when set, else `python3` on PATH (both from `env`), as an absolute path so
/// that a virtual environment's interpreter still finds its pyvenv.cfg.
/// ARGS still hold `${local_rank}`: substitute per worker. Throws UsageError naming what is missing
/// or not executable.
WorkerCommand resolve_program(const LaunchConfig& config, const Environ& env);

/// Replaces every literal "${local_rank}" in each argument.
std::vector<std::string> substitute_local_rank(const std::vector<std::string>& argv, int local_rank);

/// The absolute path of the executable regular file `name` names: `name` itself when it holds a
/// '/', else the first match on PATH from `env` (unset: /usr/local/bin:/usr/bin:/bin, as execvp).
std::optional<std::filesystem::path> find_executable(const std::string& name, const Environ& env);

/// Where a worker PROGRAM is exec'd from: find_executable, else for a bare name an executable file
/// of that name in the current folder (the file `python3 -u NAME` would have opened), so that
/// `ddprun trainer` runs ./trainer rather than feeding a binary to Python.
std::optional<std::filesystem::path> find_program(const std::string& program, const Environ& env);

}  // namespace ddprun::launcher

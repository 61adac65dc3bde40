#pragma once
/// How each worker process is started: the interpreter or executable to exec and its argv.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/base/environ.hpp"
#include "launcher/cli/launch_config.hpp"

namespace ddprun::launcher {

/// The Python interpreter that runs the workers, and why that one. Print it with describe_python
/// (`-v`, the run's log, the failure summary's ModuleNotFoundError hint).
struct PythonChoice {
  std::filesystem::path interpreter;  ///< absolute, symlinks kept (a venv's bin/python finds its pyvenv.cfg)
  /// Why this one: "PYTHON_EXEC", "beside ddprun in /env/bin", "VIRTUAL_ENV=/x", "CONDA_PREFIX=/y",
  /// "python3 on PATH", or "the #! line of /path/tool" (a console script); a skipped candidate is
  /// said after it, e.g. "python3 on PATH; VIRTUAL_ENV=/x has no bin/python".
  std::string reason;
};

/// "/usr/bin/python3 (python3 on PATH)": one line for messages and logs.
std::string describe_python(const PythonChoice& choice);

/// The interpreter of Python workers, in this documented order (the first that applies wins):
/// 1. $PYTHON_EXEC (a path, or a name looked up on PATH), as torchrun; set but not executable is
///    a UsageError naming it, never a silent fallback;
/// 2. python3, else python, in `launcher_dir`, the folder of ddprun's own executable
///    (own_executable_dir): ddprun
///    installed into a Python env (pip into a venv or conda env) sits in that env's bin/, beside
///    its interpreter, as the env's torchrun does, which runs its own interpreter (called by full
///    path, venv/bin/ddprun, the venv needs no activation);
/// 3. $VIRTUAL_ENV/bin/python: the active virtual environment;
/// 4. $CONDA_PREFIX/bin/python: the active conda environment;
/// 5. python3 on PATH.
/// A VIRTUAL_ENV or CONDA_PREFIX without an executable bin/python is skipped (said in the reason).
/// Reads only `env`, `launcher_dir` and whether those files are executable. Throws UsageError when
/// none is found; `program` only names what the interpreter was for in that message.
PythonChoice choose_python(const Environ& env, const std::string& program = "",
                           const std::filesystem::path& launcher_dir = {});


/// A Python interpreter named by a program's first line(s), as the kernel would run it.
struct PythonShebang {
  std::string interpreter;        ///< as written: an absolute path, or a name to find on PATH (`env python3`)
  std::vector<std::string> args;  ///< the interpreter's own arguments (`-E`), before "-u PROGRAM"
};

/// How much of an executable PROGRAM is read to find a Python #! line.
inline constexpr std::size_t kShebangBytes = 1024;

/// The Python interpreter of a program from the first bytes of its file (`head`, a bounded
/// prefix), or nothing when the file is not a Python script: ELF binaries, other interpreters
/// (bash), no `#!`, a first line that does not end within `head`. Understood:
/// `#!/usr/bin/python3`, `#!/x/venv/bin/python -E` (as the kernel: one argument, the rest of the
/// line), `#!/usr/bin/env python3`, `#!/usr/bin/env -S python3 -E`, and pip's console-script
/// trampoline for long paths (`#!/bin/sh`, then a line `'''exec' "/x/bin/python" "$0" "$@"`).
/// Python = a file name like python, python3, python3.11, pypy3.
std::optional<PythonShebang> parse_python_shebang(std::string_view head);

struct WorkerCommand {
  std::string executable;         ///< absolute path handed to execve
  std::vector<std::string> argv;  ///< argv[0] is what the program sees as its name
  /// The interpreter when the workers run under Python (a script, a module, a console script);
  /// nothing when PROGRAM is exec'd as it is. For `-v`, the run's log and the failure summary.
  std::optional<PythonChoice> python;
};

/// Resolves how each worker is started, from config.mode:
/// - python_script: {PYTHON, "-u", PROGRAM, ARGS...}; PROGRAM must exist and be readable.
/// - python_module: {PYTHON, "-u", "-m", PROGRAM, ARGS...}.
/// - executable: {PROGRAM as typed, ARGS...}, exec'd from find_program's path; except, unless
///   config.no_python, a file whose first line names a Python interpreter (parse_python_shebang
///   of at most kShebangBytes): {INTERPRETER, its #! args..., "-u", PROGRAM's path, ARGS...}, as
///   torchrun runs every program with `python -u`. A #! line that names no folder
///   (`#!/usr/bin/env python3`, pip's unbuilt `#!python`) asks for "the" python or python3, so it
///   runs with PYTHON, as torchrun runs it with its own; a versioned name (`env python3.9`) is
///   looked up on PATH as the kernel would. A file that cannot be read is exec'd as it is.
/// PYTHON is choose_python(env, PROGRAM, launcher_dir).
/// With config.append_local_rank, `--local_rank=${local_rank}` (underscore) or
/// `--local-rank=${local_rank}` (dash) comes right after PROGRAM, before ARGS, where
/// torch.distributed.launch puts it.
/// ARGS still hold `${local_rank}`/`$local_rank`: substitute per worker. Throws UsageError naming
/// what is missing or not executable.
WorkerCommand resolve_program(const LaunchConfig& config, const Environ& env,
                              const std::filesystem::path& launcher_dir = {});

/// --preload's demands on the command (resolve_program checks them when --preload is given): the
/// workers run under Python, with neither -S, -I nor -E among `interpreter_options` (a Python #!
/// line's). Throws UsageError naming what stands in the way.
void check_preload(const WorkerCommand& command, const std::string& program,
                   const std::vector<std::string>& interpreter_options);

/// A worker's argv: argv[0] as it is; in every other argument `$local_rank` and `${local_rank}`
/// become the local rank and `$$` becomes `$`, as torchrun's string.Template.safe_substitute
/// (`$local_rank_x`, `$LOCAL_RANK`, `${rank}` and a lone `$` stay as they are).
std::vector<std::string> substitute_local_rank(const std::vector<std::string>& argv, int local_rank);

/// The absolute path of the executable regular file `name` names: `name` itself when it holds a
/// '/', else the first match on PATH from `env` (unset: /usr/local/bin:/usr/bin:/bin, as execvp).
std::optional<std::filesystem::path> find_executable(const std::string& name, const Environ& env);

/// Where a worker PROGRAM is exec'd from: find_executable, else for a bare name an executable file
/// of that name in the current folder (the file `python3 -u NAME` would have opened), so that
/// `ddprun trainer` runs ./trainer rather than feeding a binary to Python.
std::optional<std::filesystem::path> find_program(const std::string& program, const Environ& env);

}  // namespace ddprun::launcher

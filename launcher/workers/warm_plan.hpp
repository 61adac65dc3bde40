#pragma once
/// The decisions of warm start (--preload), apart from its I/O (warm_pool.hpp): what a warm
/// interpreter's environment holds, when one may become a given worker, the messages on its socket
/// (python/ddprun_warm.py is the other end) and the lines ddprun prints about it. Pure.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/base/environ.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddprun::launcher {

/// Variables a warm interpreter starts with beyond ddprun's own environment, taken from the worker
/// environment: the ones read before the worker's environment arrives. PYTHONPATH finds ddprun's
/// sitecustomize (and the user's modules for the preload); OMP_NUM_THREADS is read once, when
/// libgomp loads (with `import torch`); PYTHONUNBUFFERED when Python starts. Everything else a
/// worker gets (RANK, MASTER_PORT, CUDA_VISIBLE_DEVICES, TORCHELASTIC_*, DDPRUN_*) differs between
/// ranks or attempts and comes with "go".
/// DDPRUN_WARM_PROTOCOL: the version of the messages below, which python/ddprun_warm.py checks (its
/// PROTOCOL): an upgrade of ddprun while a job runs gives the job's next interpreters the new file.
inline constexpr const char* kWarmProtocol = "1";

inline constexpr std::string_view kReadBeforeGo[] = {"PYTHONPATH", "OMP_NUM_THREADS", "PYTHONUNBUFFERED"};

/// The environment a warm interpreter for a worker whose environment is `worker_env` starts with:
/// `base` (ddprun's, as every worker starts from it), with each kReadBeforeGo variable as the
/// worker has it (set, or unset).
Environ warm_environment(const Environ& base, const Environ& worker_env);

/// What a warm interpreter was started as; it may become a worker only if the worker would start
/// the same: the same program and arguments, terminal, CPUs and the environment read before "go".
/// Its stdin is apart (may_become): which rank reads ddprun's stdin is known only once the ranks are.
struct WarmStart {
  int local_rank = 0;
  std::string executable;
  std::vector<std::string> argv;
  WorkerTerminal terminal = WorkerTerminal::pipes;
  std::vector<int> cpu_affinity;
  Environ env;  ///< warm_environment

  bool operator==(const WarmStart&) const = default;
};

WarmStart warm_start_of(const WorkerSpec& spec, const Environ& base, const Environ& worker_env);

/// Whether an interpreter started as `start`, with ddprun's stdin (`has_stdin`) or /dev/null, can
/// become the worker `spec` (environment `worker_env`): the same start, and stdin for a worker that
/// reads it (one that does not gets /dev/null at "go").
bool may_become(const WarmStart& start, bool has_stdin, const WorkerSpec& spec, const Environ& base,
                const Environ& worker_env);

/// The message that turns a warm interpreter into its worker: "go N STDIN\n" and N bytes of
/// NUL-terminated strings: the executable, the argument count, the arguments, the environment's
/// NAME=VALUE entries (exec_environment), as the cold worker would be exec'd. STDIN: "keep" its
/// stdin, or "null": reopen it on /dev/null (a worker that does not read ddprun's).
std::string go_message(const std::string& executable, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env_entries, bool null_stdin = false);

/// One line from a warm interpreter.
struct WarmReport {
  enum class Kind { hello, ready, failed, cuda, unknown };
  Kind kind = Kind::unknown;
  std::string text;  ///< failed: "MODULE: Exception: message"; cuda: the modules; unknown: the line
};
WarmReport parse_warm_report(std::string_view line);

/// The longest line read from a warm interpreter; a longer one is cut there (it is one exception's text).
inline constexpr std::size_t kWarmReportLimit = 4096;

/// The one line printed when warm start is given up for the job (the workers start cold from then on).
std::string describe_cold_start(const WarmReport& report, int local_rank);
/// ... when a warm interpreter ended before it became a worker (`how`: describe_exitcode's words).
std::string describe_warm_death(int local_rank, const std::string& how);

}  // namespace ddprun::launcher

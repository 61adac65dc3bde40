#pragma once
/// WorkerPreparation: what each attempt's workers are started with, beyond what the worker group
/// does itself: their specs (worker_specs.hpp), the CPUs of --numa-binding (decided once), each
/// worker's output routes and the attempt's log files (its stdout.log / stderr.log, the filtered
/// files of --duplicate-std*-filters), and the -v line naming each worker once its pid is known.
/// The log files live from the attempt's start until its group is done.
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "launcher/base/environ.hpp"
#include "launcher/base/unique_fd.hpp"
#include "launcher/cli/launch_config.hpp"
#include "launcher/cli/program.hpp"
#include "launcher/output/console_output.hpp"
#include "launcher/output/output_route.hpp"
#include "launcher/output/run_logs.hpp"
#include "launcher/workers/worker_specs.hpp"

namespace ddprun::launcher {

class WorkerPreparation {
 public:
  /// Reads whether the program links LibTorch 1.x, once per job (a few small reads of its ELF
  /// headers, docs/performance.md). The references must outlive this object (the agent's plan).
  WorkerPreparation(const LaunchConfig& config, const WorkerCommand& command, const Environ& env, std::string hostname);

  /// --numa-binding: decides each local rank's CPUs before the first start; returns the lines to
  /// print (why a worker is left unbound; with -v, each binding).
  std::vector<std::string> plan_numa_binding();

  /// This attempt's specs (`facts` without the NUMA CPUs and LibTorch, which this object adds).
  std::vector<WorkerSpec> specs(AttemptFacts facts) const;

  /// A new attempt: the last attempt's log files closed, this one's filtered files opened in its
  /// folder. Throws LaunchError when one cannot be.
  void begin_attempt(const RunLogs& logs, int attempt);
  /// Opens worker `local_rank`'s log files in `dir` and says where each of its streams goes.
  /// `rank`: its global rank, for the line prefix. Throws LaunchError when a file cannot be opened.
  WorkerRoutes open_routes(int local_rank, int rank, const std::filesystem::path& dir, ConsoleOutput& console);
  /// The attempt's group is done: its log files are closed.
  void close_attempt_files() { attempt_log_files_.clear(); }

  /// `spec` is the worker being started now (WorkerGroup starts the prepared worker at once).
  void preparing(const WorkerSpec& spec);
  /// The worker just prepared has process group `pgid`.
  struct Started {
    int local_rank = 0;
    std::optional<std::string> verbose_line;  ///< -v: the line that names it
  };
  /// nullopt when no worker was being prepared.
  std::optional<Started> started(pid_t pgid);

 private:
  const LaunchConfig& config_;
  const WorkerCommand& command_;
  const Environ& env_;
  std::string hostname_;
  bool libtorch_1_ = false;  ///< the program links LibTorch 1.x (WorkerSpec::libtorch_1), read once
  /// `--numa-binding`: each local rank's CPUs (empty: not bound), decided once before the first start.
  std::vector<std::vector<int>> numa_cpus_;

  const RunLogs* logs_ = nullptr;  ///< this attempt's log folder
  int attempt_ = 0;
  /// `--duplicate-std*-filters`: the attempt's filtered_stdout.log / filtered_stderr.log, shared by
  /// its workers; owned by attempt_log_files_; -1: none.
  int filtered_stdout_fd_ = -1;
  int filtered_stderr_fd_ = -1;
  std::vector<UniqueFd> attempt_log_files_;
  std::optional<WorkerSpec> being_started_;  ///< the worker prepared, named when its pid is known
};

}  // namespace ddprun::launcher

#pragma once
/// FailureRecord: what one attempt's failures were, as they happened. Each failed worker becomes a
/// WorkerFailure (its error file, its stderr's last lines, whether the kernel's OOM killer did it),
/// first observed first, for the failure summary; log files that could not be written are kept
/// for the job's last warning. It knows no worker group: the stderr tail is handed in.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/report/failure_summary.hpp"
#include "launcher/report/oom_watch.hpp"
#include "launcher/workers/log_write_error.hpp"
#include "launcher/workers/worker_exit.hpp"

namespace ddprun::launcher {

class FailureRecord {
 public:
  /// `host`: this node's name, as the summary shows it; `python`: describe_python of the workers'
  /// interpreter, empty when PROGRAM is exec'd as it is; `oom`: where OOM kills are counted.
  FailureRecord(std::string host, std::string python, OomWatch oom);

  /// A new attempt of `workers` workers: the last attempt's failures and error files forgotten.
  void begin_attempt(std::size_t workers);
  /// Kills the OOM killer made before now are not this attempt's (read as its workers start).
  void count_oom_kills_from_now();
  /// Worker `local_rank` of this attempt writes its error file at `path`.
  void set_error_file(int local_rank, std::string path);

  /// Describes the failure of `exit` (global rank `rank`) and keeps it. `stderr_tail`: the last
  /// lines of its stderr.
  void record(const WorkerExit& exit, int rank, std::string stderr_tail);
  /// This attempt's failures, first observed first.
  const std::vector<WorkerFailure>& failures() const { return failures_; }

  /// A log file could not be written: kept, and the warning to print now is returned.
  std::string log_error(const LogWriteError& error);
  /// The job's last word on log files that could not be written; nothing when all were.
  std::optional<std::string> incomplete_logs_warning() const;

 private:
  std::string host_;
  std::string python_;
  OomWatch oom_;
  std::optional<std::uint64_t> oom_kills_seen_;  ///< OOM-kill count already accounted for
  std::vector<std::string> error_files_;         ///< per local rank, this attempt
  std::vector<WorkerFailure> failures_;          ///< this attempt's recorded failures, first observed first
  std::vector<LogWriteError> log_errors_;        ///< the whole job's
};

}  // namespace ddprun::launcher

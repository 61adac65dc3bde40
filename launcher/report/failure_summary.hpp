#pragma once
/// The failure summary ddprun prints when its job fails, laid out as torchrun's (PyTorch's
/// ChildFailedError.format_msg) so that tools reading torchrun's summary read ddprun's.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/report/error_file.hpp"

namespace ddprun::launcher {

/// One worker that failed.
struct WorkerFailure {
  int rank = 0;
  int local_rank = 0;
  int exitcode = 0;  ///< torchrun's convention: exit status (> 0), or -N when killed by signal N
  int pid = 0;
  std::chrono::system_clock::time_point time;  ///< when ddprun observed the exit
  std::string host;
  std::string error_file;                 ///< the TORCHELASTIC_ERROR_FILE path given to the worker
  std::optional<ErrorFileContent> error;  ///< its content, when the worker wrote one
  std::string stderr_tail;                ///< last lines of its stderr, may be empty
  bool oom_killed = false;                ///< the kernel's OOM killer did it
  /// The interpreter that ran the worker, "/usr/bin/python3 (python3 on PATH)" (describe_python);
  /// empty when PROGRAM was not run by Python. Named in the ModuleNotFoundError hint.
  std::string python;
};

/// torchrun's summary, field for field, ending with "\n" (torchrun's leading blank line, which only
/// moves its text off the exception's line, is left out):
///
///     ====================================================
///     <program> FAILED
///     ----------------------------------------------------
///     Failures:
///     [<rank>]: ...                (the others, by time; or "  <NO_OTHER_FAILURES>")
///     ----------------------------------------------------
///     Root Cause (first observed failure):
///     [<rank>]:
///       time      : YYYY-MM-DD_HH:MM:SS   (local time)
///       host      : <host>
///       rank      : R (local_rank: L)
///       exitcode  : C (pid: P)
///       error_file: <path, or <N/A> when the worker wrote none>
///       traceback : <first line>
///       <more lines, indented by two>
///     ====================================================
///
/// Rules are as wide as the widest line (in characters), at most 60. A failure's time is its error
/// file's timestamp, else when its exit was observed, in whole seconds as torchrun's; the root cause
/// is the failure with the earliest time, ties broken by the observed exit time, then the lowest rank.
/// The traceback is the error file's (its message added when the traceback lacks it); without an
/// error file, "Signal N (SIGNAME) received by PID P" for a signal death, then the last lines of
/// stderr under "(last lines of stderr)"; torchrun's documentation link only when there is nothing
/// else to say. An OOM kill is said on the signal line (": killed by the kernel's OOM killer") or on
/// a line of its own. With no failures, the root cause reads "  <N/A>". Worker-written text is shown
/// terminal-safe (control characters in caret notation) and bounded to its last 100 lines and
/// 16 KiB, with a line saying how many were left out and where the whole text is.
/// When a Python worker's stderr or error file says `ModuleNotFoundError: No module named 'M'`,
/// a last line names the interpreter that ran it and how to choose another (PYTHON_EXEC).
std::string format_failure_summary(const std::string& program, const std::vector<WorkerFailure>& failures);

}  // namespace ddprun::launcher

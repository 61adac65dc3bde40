#include "launcher/report/failure_record.hpp"

#include <signal.h>

#include <utility>

#include "launcher/report/error_file.hpp"

namespace ddprun::launcher {

FailureRecord::FailureRecord(std::string host, std::string python, OomWatch oom)
    : host_(std::move(host)), python_(std::move(python)), oom_(std::move(oom)) {}

void FailureRecord::begin_attempt(std::size_t workers) {
  failures_.clear();
  error_files_.assign(workers, std::string());
}

void FailureRecord::count_oom_kills_from_now() { oom_kills_seen_ = oom_.read_kills(); }

void FailureRecord::set_error_file(int local_rank, std::string path) {
  error_files_.at(static_cast<std::size_t>(local_rank)) = std::move(path);
}

void FailureRecord::record(const WorkerExit& exit, int rank, std::string stderr_tail) {
  WorkerFailure failure;
  failure.local_rank = exit.local_rank;
  failure.rank = rank;
  failure.exitcode = exit.exitcode;
  failure.pid = exit.pid;
  failure.time = exit.time;
  failure.host = host_;
  failure.error_file = error_files_.at(static_cast<std::size_t>(exit.local_rank));
  failure.error = read_error_file(failure.error_file);
  failure.stderr_tail = std::move(stderr_tail);
  failure.python = python_;
  if (exit.exitcode == -SIGKILL && oom_kills_seen_) {
    // The kernel counts the kill before it delivers SIGKILL, so the count is current by now.
    // Each counted kill explains one death only: a second SIGKILL (a user's kill -9) is not an OOM.
    auto now = oom_.read_kills();
    failure.oom_killed = now && *now > *oom_kills_seen_;
    if (failure.oom_killed) oom_kills_seen_ = *oom_kills_seen_ + 1;
  }
  failures_.push_back(std::move(failure));
}

std::string FailureRecord::log_error(const LogWriteError& error) {
  log_errors_.push_back(error);
  const std::string what = "warning: cannot write " + error.path + ": " + error.reason + "; local rank " +
                           std::to_string(error.local_rank);
  if (error.filtered) return what + "'s matching lines are no longer copied there";
  return what + "'s lines go to the console from now on";
}

std::optional<std::string> FailureRecord::incomplete_logs_warning() const {
  if (log_errors_.empty()) return std::nullopt;
  const LogWriteError& first = log_errors_.front();
  return "warning: " + std::to_string(log_errors_.size()) + " log file(s) are incomplete (" + first.path + ": " +
         first.reason + "); their lines after the failure were shown on the console";
}

}  // namespace ddprun::launcher

#pragma once
/// Guardian: a small process, forked when the agent starts, whose only job is to outlive the agent
/// and kill what the agent started. PR_SET_PDEATHSIG reaches a worker's main process only; a
/// wrapper script's trainer, DataLoader processes or a setsid'd helper would survive a SIGKILLed
/// agent without it.
///
/// It holds the read end of a pipe whose write end only the agent holds, until the agent exits.
/// The agent tells it each worker's process group as it starts and stops. When the pipe ends, the
/// agent is gone (exited, or died by any signal): the guardian kills what is left in the job's
/// cgroup (exact; after a clean end the agent has removed it already) and removes the cgroup; and
/// unless the agent said it had cleaned up itself, also every worker process group it was told of
/// and every process whose environment carries the job's marker (found in /proc: the way for
/// machines without a writable cgroup v2). It runs in a session
/// of its own with terminal signals ignored, so the Ctrl-C or hangup that ends the agent does not
/// end it first. It is never reaped by the agent: once the agent is gone, init reaps it.
#include <sys/types.h>

#include <memory>
#include <string>

namespace ddprun::launcher {

/// The environment variable that marks every worker of one agent, and so every descendant that
/// keeps its environment.
inline constexpr const char* kGuardianMarkVariable = "DDPRUN_GUARDIAN_MARK";

class Guardian {
 public:
  /// Forks the guardian for a job whose workers run in `cgroup_dir` (empty: none) and carry
  /// `marker` as kGuardianMarkVariable. Call it before the agent starts any thread. nullptr when
  /// the fork fails (the job then runs without it).
  static std::unique_ptr<Guardian> start(const std::string& cgroup_dir, const std::string& marker);

  ~Guardian();  ///< leaves the pipe open: it must end with the process, not before
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  pid_t pid() const { return pid_; }

  /// A worker's process group started / is gone. Never blocks: when the guardian lags, the notes
  /// wait here and go with the next one.
  void watch(pid_t pgid);
  void forget(pid_t pgid);

  /// The agent has stopped every process itself: when it is gone, the guardian only removes the
  /// cgroup (process groups and pids it knew may be reused by then).
  void mark_clean();

 private:
  Guardian(pid_t pid, int pipe_fd) : pid_(pid), pipe_fd_(pipe_fd) {}
  void send(std::string note);

  pid_t pid_;
  int pipe_fd_;
  std::string unsent_;
};

/// A fresh random marker value for one agent.
std::string new_guardian_marker();

}  // namespace ddprun::launcher

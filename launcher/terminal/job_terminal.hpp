#pragma once
/// JobTerminal: the job's side of ddprun's terminal. Whether workers get ptys (--pty), ddprun's stdin
/// carried to them (--stdin), the window size of ddprun's terminal passed on when it changes
/// (SIGWINCH), and Ctrl-Z (SIGTSTP) pausing the whole job as it pauses torchrun's. It owns the
/// signal sets and the stdin forwarder; the workers it acts on are reached through the handlers,
/// so that it knows no worker group and no agent.
#include <sys/ioctl.h>
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "launcher/cli/launch_config.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddprun::launcher {

class StdinForwarder;

/// What the terminal side is asked to do, decided from the command line.
struct TerminalSettings {
  PtyMode pty = PtyMode::automatic;
  bool forward_stdin = false;    ///< --stdin rank0 or all
  bool pause_on_ctrl_z = true;   ///< SIGTSTP is neither a --signals-to-handle nor a --forward-signals signal
};

/// The settings `config` asks for.
TerminalSettings terminal_settings(const LaunchConfig& config);

struct JobTerminalHandlers {
  /// `signo` (SIGSTOP, then SIGCONT) to the running workers' process groups, when there are any.
  std::function<void(int signo)> signal_workers;
  /// ddprun's terminal has a new size (none: it reports none): the worker ptys and the console's live
  /// lines follow it.
  std::function<void(const std::optional<winsize>& window)> window_changed;
  /// One line of ddprun's own (a warning).
  std::function<void(const std::string& line)> print;
};

class JobTerminal {
 public:
  /// Decides the workers' terminal and starts listening (stdin, SIGWINCH, SIGTSTP). Made while the
  /// agent runs, once the console exists: a window change refreshes it.
  JobTerminal(boost::asio::io_context& io, const TerminalSettings& settings, JobTerminalHandlers handlers);
  ~JobTerminal();
  JobTerminal(const JobTerminal&) = delete;
  JobTerminal& operator=(const JobTerminal&) = delete;

  /// Pipes, ptys, or ptys when they can be had: for every worker of the job.
  WorkerTerminal worker_terminal() const { return worker_terminal_; }

  /// Worker `pid` reads ddprun's stdin from `fd` (owned from now on; closed when stdin is not forwarded).
  void add_stdin_target(pid_t pid, int fd, bool pty);
  /// Worker `pid` exited: its share of stdin is dropped.
  void remove_stdin_target(pid_t pid);
  /// A worker's pty could not be opened: warned about once a job, the worker writes to pipes.
  void pty_unavailable(const std::string& reason);
  /// The job ends: stdin is no longer read, ddprun's terminal back in its own mode. The signal sets
  /// stay until this object goes (a Ctrl-Z while the store lingers is still caught).
  void stop_forwarding_stdin();

 private:
  void wait_suspensions();
  /// SIGSTOP to every worker's process group, ddprun stops itself; once continued, SIGCONT to them.
  void suspend_job();
  void wait_window_changes();

  JobTerminalHandlers handlers_;
  WorkerTerminal worker_terminal_ = WorkerTerminal::pipes;
  std::unique_ptr<StdinForwarder> stdin_;  ///< null: --stdin none
  std::optional<boost::asio::signal_set> window_changes_;
  std::optional<boost::asio::signal_set> suspensions_;  ///< SIGTSTP: pause the job (Ctrl-Z)
  bool pty_warned_ = false;
};

}  // namespace ddprun::launcher

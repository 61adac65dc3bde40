#include "launcher/terminal/job_terminal.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "launcher/terminal/stdin_forwarder.hpp"
#include "launcher/terminal/terminal_window.hpp"

namespace ddprun::launcher {

TerminalSettings terminal_settings(const LaunchConfig& config) {
  // Ctrl-Z reaches ddprun alone (workers are in process groups of their own): unless the user made
  // SIGTSTP a stop or forwarded signal, it pauses the whole job, as it pauses torchrun's.
  auto listed = [](const std::vector<int>& list) { return std::find(list.begin(), list.end(), SIGTSTP) != list.end(); };
  TerminalSettings settings;
  settings.pty = config.pty;
  settings.forward_stdin = config.stdin_target != StdinTarget::none;
  settings.pause_on_ctrl_z = !listed(config.signals_to_handle) && !listed(config.signals_to_forward);
  return settings;
}

JobTerminal::JobTerminal(boost::asio::io_context& io, const TerminalSettings& settings, JobTerminalHandlers handlers)
    : handlers_(std::move(handlers)) {
  const bool console_is_terminal = ::isatty(STDOUT_FILENO) == 1;
  if (settings.pty == PtyMode::on) {
    worker_terminal_ = WorkerTerminal::pty;
  } else if (settings.pty == PtyMode::automatic && console_is_terminal) {
    worker_terminal_ = WorkerTerminal::pty_or_pipes;
  }
  if (settings.forward_stdin) stdin_ = std::make_unique<StdinForwarder>(io, STDIN_FILENO);
  // On a terminal, worker ptys and the console's live lines follow its size.
  if (terminal_window()) {
    window_changes_.emplace(io, SIGWINCH);
    wait_window_changes();
  }
  if (settings.pause_on_ctrl_z) {
    suspensions_.emplace(io, SIGTSTP);
    wait_suspensions();
  }
}

JobTerminal::~JobTerminal() = default;

void JobTerminal::add_stdin_target(pid_t pid, int fd, bool pty) {
  if (stdin_) return stdin_->add_target(pid, fd, pty);
  ::close(fd);
}

void JobTerminal::remove_stdin_target(pid_t pid) {
  if (stdin_) stdin_->remove_target(pid);
}

void JobTerminal::pty_unavailable(const std::string& reason) {
  if (!std::exchange(pty_warned_, true)) handlers_.print("warning: " + reason + "; workers write to pipes instead");
}

void JobTerminal::stop_forwarding_stdin() { stdin_.reset(); }

void JobTerminal::wait_suspensions() {
  suspensions_->async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    suspend_job();
    wait_suspensions();
  });
}

void JobTerminal::suspend_job() {
  // The workers stop first, then ddprun itself, as the shell expects of a job that got SIGTSTP
  // (it waits for ddprun to stop, then takes the terminal back, in its own mode).
  handlers_.signal_workers(SIGSTOP);
  if (stdin_) stdin_->restore_terminal();
  ::kill(::getpid(), SIGSTOP);
  // Continued (fg, bg, SIGCONT): the workers go on with ddprun. The stdin forwarder takes the
  // terminal again on the same SIGCONT when ddprun is in the foreground.
  handlers_.signal_workers(SIGCONT);
}

void JobTerminal::wait_window_changes() {
  window_changes_->async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    handlers_.window_changed(terminal_window());
    wait_window_changes();
  });
}

}  // namespace ddprun::launcher

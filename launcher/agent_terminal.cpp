// The agent's terminal side: whether workers get ptys, ddprun's stdin forwarded to them, the
// window size of ddprun's terminal passed on to each worker pty, and job control (Ctrl-Z).
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "launcher/agent.hpp"
#include "launcher/output/console.hpp"
#include "launcher/terminal/stdin_forwarder.hpp"
#include "launcher/terminal/terminal_window.hpp"
#include "launcher/workers/worker_group.hpp"

namespace ddprun::launcher {

void Agent::set_up_terminals() {
  const LaunchConfig& config = plan_.config;
  const bool console_is_terminal = ::isatty(STDOUT_FILENO) == 1;
  if (config.pty == PtyMode::on) {
    worker_terminal_ = WorkerTerminal::pty;
  } else if (config.pty == PtyMode::automatic && console_is_terminal) {
    worker_terminal_ = WorkerTerminal::pty_or_pipes;
  }
  if (config.stdin_target != StdinTarget::none) stdin_ = std::make_unique<StdinForwarder>(io_, STDIN_FILENO);
  // On a terminal, worker ptys and the console's live lines follow its size.
  if (terminal_window()) {
    window_changes_.emplace(io_, SIGWINCH);
    wait_window_changes();
  }
  // Ctrl-Z reaches ddprun alone (workers are in process groups of their own): unless the user made
  // SIGTSTP a stop or forwarded signal, it pauses the whole job, as it pauses torchrun's.
  auto listed = [](const std::vector<int>& list) { return std::find(list.begin(), list.end(), SIGTSTP) != list.end(); };
  if (!listed(config.signals_to_handle) && !listed(config.signals_to_forward)) {
    suspensions_.emplace(io_, SIGTSTP);
    wait_suspensions();
  }
}

void Agent::wait_suspensions() {
  suspensions_->async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    suspend_job();
    wait_suspensions();
  });
}

void Agent::suspend_job() {
  // The workers stop first, then ddprun itself, as the shell expects of a job that got SIGTSTP
  // (it waits for ddprun to stop, then takes the terminal back, in its own mode).
  if (group_) group_->signal_running(SIGSTOP);
  if (stdin_) stdin_->restore_terminal();
  ::kill(::getpid(), SIGSTOP);
  // Continued (fg, bg, SIGCONT): the workers go on with ddprun. The stdin forwarder takes the
  // terminal again on the same SIGCONT when ddprun is in the foreground.
  if (group_) group_->signal_running(SIGCONT);
}

void Agent::wait_window_changes() {
  window_changes_->async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    if (auto window = terminal_window(); window && group_) group_->set_window(*window);
    if (console_) console_->out().refresh_size();
    wait_window_changes();
  });
}

}  // namespace ddprun::launcher

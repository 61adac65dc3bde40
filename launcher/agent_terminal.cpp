// The agent's terminal side: whether workers get ptys, ddprun's stdin forwarded to them, and the
// window size of ddprun's terminal passed on to each worker pty.
#include <signal.h>
#include <unistd.h>

#include "agent.hpp"
#include "terminal_window.hpp"

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

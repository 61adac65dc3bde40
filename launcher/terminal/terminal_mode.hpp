#pragma once
/// TerminalMode: ddprun's own terminal while its input is forwarded to a worker's pty. The worker's
/// pty does the line editing and the echo (pdb, input() and readline see a terminal and draw on
/// it), so ddprun's terminal must pass each key on as typed: no line editing, no echo here. ISIG
/// stays on: Ctrl-C and Ctrl-\ still signal ddprun, which stops the job as without forwarding.
///
/// The mode is changed only while ddprun is in the terminal's foreground process group (from the
/// background, tcsetattr would stop ddprun with SIGTTOU, or change a terminal the shell owns), and
/// restored on every way out: restore() when the last worker taking input is gone, and the
/// destructor (the agent's end: success, failure, a stop by signal, an exception).
#include <termios.h>

#include <optional>

namespace ddprun::launcher {

/// The settings of a terminal whose keys go to a worker's pty: `t` without canonical input, echo
/// and extended input processing (so Ctrl-V and Ctrl-O reach the worker), one byte at a time. Pure.
termios forwarding_mode(termios t);

/// Whether this process is in the foreground process group of terminal `fd`.
bool in_foreground(int fd);

class TerminalMode {
 public:
  explicit TerminalMode(int fd) : fd_(fd) {}
  ~TerminalMode() { restore(); }
  TerminalMode(const TerminalMode&) = delete;
  TerminalMode& operator=(const TerminalMode&) = delete;

  /// Puts the terminal in forwarding mode when ddprun is in its foreground (again after a stop and
  /// `fg`: the shell restored its own mode meanwhile). Returns whether the mode is on.
  bool enter();
  bool entered() const { return entered_; }
  /// Puts back the mode found at the first enter(); a no-op when never entered or in the background.
  void restore();

 private:
  int fd_;
  std::optional<termios> saved_;
  bool entered_ = false;
};

}  // namespace ddprun::launcher

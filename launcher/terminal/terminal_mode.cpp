#include "launcher/terminal/terminal_mode.hpp"

#include <unistd.h>

namespace ddprun::launcher {

termios forwarding_mode(termios t) {
  t.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO | ECHONL | IEXTEN);
  t.c_lflag |= ISIG;
  t.c_cc[VMIN] = 1;
  t.c_cc[VTIME] = 0;
  return t;
}

bool in_foreground(int fd) {
  pid_t foreground = ::tcgetpgrp(fd);
  return foreground > 0 && foreground == ::getpgrp();
}

bool TerminalMode::enter() {
  if (!in_foreground(fd_)) return false;
  termios current{};
  if (::tcgetattr(fd_, &current) != 0) return false;
  if (!saved_) saved_ = current;
  termios wanted = forwarding_mode(*saved_);
  if (::tcsetattr(fd_, TCSANOW, &wanted) != 0) return false;
  entered_ = true;
  return true;
}

void TerminalMode::restore() {
  if (!entered_) return;
  entered_ = false;
  // In the background, the shell has put back its own mode when it took the terminal (a stop).
  // TCSANOW: waiting for the output to drain would block on a terminal paused with Ctrl-S.
  if (saved_ && in_foreground(fd_)) ::tcsetattr(fd_, TCSANOW, &*saved_);
}

}  // namespace ddprun::launcher

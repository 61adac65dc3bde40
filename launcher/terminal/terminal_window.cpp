#include "launcher/terminal/terminal_window.hpp"

#include <unistd.h>

namespace ddprun::launcher {

std::optional<winsize> terminal_window() {
  for (int fd : {STDOUT_FILENO, STDERR_FILENO, STDIN_FILENO}) {
    winsize size{};
    if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 && size.ws_row > 0) return size;
  }
  return std::nullopt;
}

}  // namespace ddprun::launcher

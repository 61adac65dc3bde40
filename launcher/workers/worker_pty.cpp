#include "launcher/workers/worker_pty.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

namespace ddprun::launcher {

termios worker_pty_mode(termios defaults) {
  defaults.c_oflag &= ~static_cast<tcflag_t>(OPOST);
  return defaults;
}

PtyPair open_worker_pty(const std::optional<winsize>& window) {
  auto fail = [] { throw std::system_error(errno, std::generic_category()); };
  PtyPair pair;
  pair.master = UniqueFd(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
  if (pair.master.get() < 0) fail();
  if (::unlockpt(pair.master.get()) != 0) fail();
  // TIOCGPTPEER (Linux 4.13) opens the slave without a path lookup; ptsname otherwise.
  int slave = ::ioctl(pair.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) {
    char name[64];
    if (::ptsname_r(pair.master.get(), name, sizeof name) != 0) fail();
    slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) fail();
  }
  pair.slave = UniqueFd(slave);
  termios mode{};
  if (::tcgetattr(slave, &mode) != 0) fail();
  mode = worker_pty_mode(mode);
  if (::tcsetattr(slave, TCSANOW, &mode) != 0) fail();
  if (window && window->ws_col > 0 && window->ws_row > 0) ::ioctl(slave, TIOCSWINSZ, &*window);
  return pair;
}

std::string describe_pty_errno(int error) {
  std::string text = std::strerror(error);
  if (error == ENOSPC) {
    std::string max = "?";
    std::ifstream("/proc/sys/kernel/pty/max") >> max;
    return text + " (the system's pseudo-terminals are used up: /proc/sys/kernel/pty/max is " + max +
           "; use --pty off, or start fewer workers)";
  }
  if (error == EMFILE) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    return text + " (the open-file limit is " + std::to_string(limit.rlim_cur) +
           "; a worker with ptys needs 4 descriptors: raise it with ulimit -n, or use --pty off)";
  }
  if (error == ENOENT || error == ENODEV || error == EACCES) {
    return text + " (no usable /dev/ptmx: is devpts mounted? use --pty off)";
  }
  return text;
}

}  // namespace ddprun::launcher

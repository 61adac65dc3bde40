#pragma once
/// The size of ddprun's terminal, the one its workers' ptys copy.
#include <sys/ioctl.h>

#include <optional>

namespace ddprun::launcher {

/// The window size of the first of ddprun's stdout, stderr and stdin that is a terminal; none when
/// none is (or the terminal reports no size).
std::optional<winsize> terminal_window();

}  // namespace ddprun::launcher

#pragma once
/// A pseudo-terminal for one worker stream: the worker writes to the slave (isatty true, so C stdio
/// line-buffers and programs draw progress bars), ddprun reads the master on its loop like a pipe.
#include <sys/ioctl.h>
#include <termios.h>

#include <optional>
#include <string>

#include "launcher/base/unique_fd.hpp"

namespace ddprun::launcher {

struct PtyPair {
  UniqueFd master;  ///< ddprun's end: close-on-exec, non-blocking
  UniqueFd slave;   ///< the worker's end: close-on-exec (dup2'd onto 0/1/2 in the child)
};

/// The terminal settings of a worker pty: the kernel's defaults for input (the worker's side does
/// line editing and echo, as on a terminal, so pdb and input() behave as at a shell), with output
/// processing off (no "\n" -> "\r\n"): the bytes ddprun reads are the bytes the worker wrote. Pure.
termios worker_pty_mode(termios defaults);

/// Opens a pty pair in worker mode with window size `window` (none: the kernel's 0x0). Throws
/// std::system_error with the errno (ENOSPC: the system's pty limit; EMFILE: descriptors).
PtyPair open_worker_pty(const std::optional<winsize>& window);

/// The errno text of a pty that could not be opened, with the limit behind it when it is one.
std::string describe_pty_errno(int error);

}  // namespace ddprun::launcher

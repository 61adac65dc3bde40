#pragma once
/// Console: ddprun's stdout and stderr as line sinks. Every batch of whole lines goes out in one
/// write loop from the one event-loop thread, so lines of different workers never tear.
#include <string>
#include <string_view>

#include "launcher/base/environ.hpp"

namespace ddprun::launcher {

/// Whether prefixes get colour: only on a terminal, unless NO_COLOR (off) or CLICOLOR_FORCE (on)
/// says otherwise (https://no-color.org, https://bixense.com/clicolors).
bool use_color(const Environ& env, int fd);

/// Expands `${role_name}`, `${rank}`, `${local_rank}` and `${hostname}` in a prefix template.
std::string expand_prefix(std::string_view tmpl, const std::string& role, int rank, int local_rank,
                          const std::string& hostname);

/// Wraps `prefix` in an ANSI colour chosen by local rank, so neighbouring ranks differ.
std::string colorize(const std::string& prefix, int local_rank);

/// Writes all of `data` to `fd`, retrying on EINTR and short writes. A closed reader (EPIPE) is
/// not an error for a launcher: returns false and the caller stops writing to that fd.
bool write_all(int fd, std::string_view data);

}  // namespace ddprun::launcher

#pragma once
/// Signal numbers <-> names ("SIGTERM"), for flags, messages and the failure summary.
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::launcher {

/// "SIGKILL" for 9; "signal 77" for a number without a name.
std::string signal_name(int signo);

/// An exitcode in torchrun's convention (-N: killed by signal N) in words: "exit code 3",
/// "killed by SIGKILL".
std::string describe_exitcode(int exitcode);

/// 15 for "SIGTERM", "TERM" or "15" (case-insensitive); nothing when unknown.
std::optional<int> signal_from_name(std::string_view name);

}  // namespace ddprun::launcher

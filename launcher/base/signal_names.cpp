#include "launcher/base/signal_names.hpp"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>

#include "common/integer.hpp"

namespace ddprun::launcher {

std::string signal_name(int signo) {
  if (const char* abbrev = ::sigabbrev_np(signo)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(signo);
}

std::optional<int> signal_from_name(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (auto number = common::parse_integer<int>(upper)) {
    if (*number > 0 && *number < NSIG) return number;
    return std::nullopt;
  }
  std::string_view bare = upper;
  if (bare.starts_with("SIG")) bare.remove_prefix(3);
  for (int signo = 1; signo < NSIG; ++signo) {
    const char* abbrev = ::sigabbrev_np(signo);
    if (abbrev != nullptr && bare == abbrev) return signo;
  }
  return std::nullopt;
}

std::string describe_exitcode(int exitcode) {
  if (exitcode < 0) return "killed by " + signal_name(-exitcode);
  return "exit code " + std::to_string(exitcode);
}

}  // namespace ddprun::launcher

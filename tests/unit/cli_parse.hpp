#pragma once
/// Shorthands of the command-line tests: parse a command line against a known environment and
/// host, or get the one-line usage error it must cause.
#include <string>
#include <vector>

#include "launcher/cli.hpp"
#include "launcher/errors.hpp"

namespace ddprun::launcher::cli_testing {

using Args = std::vector<std::string>;

inline const HostFacts kCpuHost{8, 0};
inline const HostFacts kGpuHost{64, 4};

/// A PATH with nothing on it, so that a bare program name is never found by accident.
inline const Environ kNoPath{{"PATH", "/nonexistent/ddprun"}};

inline LaunchConfig parse(const Args& args, const Environ& env = kNoPath, const HostFacts& host = kCpuHost) {
  return parse_command_line(args, env, host);
}

/// The message of the UsageError that parsing `args` must throw ("" when none is thrown).
inline std::string usage_error(const Args& args, const Environ& env = kNoPath, const HostFacts& host = kCpuHost) {
  try {
    parse_command_line(args, env, host);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

inline std::string joined(const Args& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace ddprun::launcher::cli_testing

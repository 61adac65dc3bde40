#pragma once
/// Shorthands of the command-line tests: parse a command line against a known environment and
/// host, or get the one-line usage error it must cause.
#include <string>
#include <variant>
#include <vector>

#include "launcher/cli/cli.hpp"
#include "launcher/base/errors.hpp"
#include "rendezvous/endpoint.hpp"

namespace ddprun::launcher::cli_testing {

using Args = std::vector<std::string>;

inline const HostFacts kCpuHost{8, 0};
inline const HostFacts kGpuHost{64, 4};

/// A PATH with nothing on it, so that a bare program name is never found by accident.
inline const Environ kNoPath{{"PATH", "/nonexistent/ddprun"}};

/// The job `args` describe (a test fails with bad_variant_access when they ask for --help instead).
inline LaunchConfig parse(const Args& args, const Environ& env = kNoPath, const HostFacts& host = kCpuHost) {
  return std::get<LaunchConfig>(parse_command_line(args, env, host));
}

/// The --help/--version text `args` ask for; "" when they describe a job.
inline std::string info(const Args& args, const Environ& env = kNoPath, const HostFacts& host = kCpuHost) {
  CommandLine command_line = parse_command_line(args, env, host);
  const auto* text = std::get_if<InfoText>(&command_line);
  return text == nullptr ? "" : text->text;
}

/// --rdzv-endpoint as resolved, "host:port" ("[v6]:port"); "" when unset.
inline std::string endpoint_text(const LaunchConfig& config) {
  if (!config.rdzv_endpoint) return "";
  return rendezvous::format_endpoint(config.rdzv_endpoint->host, config.rdzv_endpoint->port);
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

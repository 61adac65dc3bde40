#pragma once
/// The command line and the PET_* environment -> one validated LaunchConfig. Everything here is a
/// plain function of its inputs (host facts are passed in), except that deciding whether PROGRAM
/// is an executable looks at the file system.
#include <string>
#include <string_view>
#include <vector>

#include "environ.hpp"
#include "launch_config.hpp"

namespace ddprun::launcher {

/// What `gpu`/`cpu`/`auto` and the device checks count; passed in so that parsing stays pure.
struct HostFacts {
  int cpu_count = 1;
  int device_count = 0;
};

/// Thrown for --help / --version: main prints `text` (which ends with a newline) to stdout and exits 0.
struct InfoRequested {
  std::string text;
};

/// `args` = argv[1..]. Precedence: command line > PET_<NAME> environment variable > default; an
/// empty PET_* value counts as unset. Options stop at PROGRAM (the first positional argument, or
/// the argument after `--`); everything after it is kept verbatim in program_args.
/// Throws UsageError (one line, no trailing newline, starting with the flag it is about, and
/// naming the PET_* variable when the value came from there) or InfoRequested.
LaunchConfig parse_command_line(const std::vector<std::string>& args, const Environ& env, const HostFacts& host);

/// cpu_count: CPUs this process may run on (sched_getaffinity, so a container's or taskset's
/// limit counts); device_count: visible_devices(env).size().
HostFacts read_host_facts(const Environ& env);

/// A rendezvous endpoint split into its parts.
struct Endpoint {
  std::string host;  ///< without the brackets of an IPv6 address
  int port = 0;
};

/// Parses `host[:port]` or `[v6addr][:port]` (torchrun's rules, stricter: an unbracketed IPv6
/// address is refused instead of being split at its last ':'). Empty text = localhost.
/// The port defaults to `default_port`. Throws UsageError starting with `flag` when malformed.
Endpoint parse_endpoint(std::string_view text, int default_port, std::string_view flag = "--rdzv-endpoint");

/// `value` in double quotes with control characters escaped, so that a message quoting user
/// input stays on one line.
std::string quote_for_message(std::string_view value);

}  // namespace ddprun::launcher

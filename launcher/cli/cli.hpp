#pragma once
/// The command line and the PET_* environment -> one validated, resolved LaunchConfig, or the text
/// --help/--version ask for. Everything here is a plain function of its inputs (host facts are
/// passed in), except that deciding whether PROGRAM is an executable looks at the file system and
/// DDPRUN_STORE_TOKEN_FILE is read.
#include <string>
#include <variant>
#include <vector>

#include "launcher/base/environ.hpp"
#include "launcher/cli/host_facts.hpp"
#include "launcher/cli/launch_config.hpp"

namespace ddprun::launcher {

/// What --help / --version print: `text` (ending with a newline) on stdout, exit status 0.
struct InfoText {
  std::string text;
};

/// A job to run, or text to print instead.
using CommandLine = std::variant<LaunchConfig, InfoText>;

/// `args` = argv[1..]. Precedence: command line > PET_<NAME> environment variable > default; an
/// empty PET_* value counts as unset. Options stop at PROGRAM (the first positional argument, or
/// the argument after `--`); everything after it is kept verbatim in program_args.
/// Resolves everything later stages read (LaunchConfig's typed values: backend, endpoints,
/// rendezvous settings, topology, devices per local rank, store token), so that nothing after it
/// raises a usage error. Throws UsageError: one line, no trailing newline, starting with the flag it
/// is about (naming the PET_* variable when the value came from there) or the variable
/// (DDPRUN_STORE_TOKEN...).
CommandLine parse_command_line(const std::vector<std::string>& args, const Environ& env, const HostFacts& host);

/// cpu_count: CPUs this process may run on (sched_getaffinity, so a container's or taskset's
/// limit counts); count_devices: the drivers' answer (probe_devices) read with `env`'s
/// *_VISIBLE_DEVICES (decide_visible_devices).
HostFacts read_host_facts(const Environ& env);

}  // namespace ddprun::launcher

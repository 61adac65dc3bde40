#pragma once
/// The command line and the PET_* environment -> one validated LaunchConfig. Everything here is a
/// plain function of its inputs (host facts are passed in), except that deciding whether PROGRAM
/// is an executable looks at the file system.
#include <functional>
#include <string>
#include <vector>

#include "launcher/cli_values.hpp"  // Endpoint, parse_endpoint, quote_for_message: part of this interface
#include "launcher/devices.hpp"
#include "launcher/environ.hpp"
#include "launcher/launch_config.hpp"

namespace ddprun::launcher {

/// What `gpu`/`cpu`/`auto` and the device checks count; passed in so that parsing stays pure.
struct HostFacts {
  HostFacts(int cpus = 1, int devices = 0) : cpu_count(cpus), device_count(devices) {}
  int cpu_count = 1;
  int device_count = 0;
  std::string device_source;  ///< where device_count came from (VisibleDevices::source), for messages
  /// When set, it fills device_count and device_source, asked only when they matter (`gpu`, `auto`,
  /// --devices-per-worker > 0): a driver may take seconds to answer.
  std::function<VisibleDevices()> count_devices;
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
/// limit counts); count_devices: the drivers' answer (probe_devices) read with `env`'s
/// *_VISIBLE_DEVICES (decide_visible_devices).
HostFacts read_host_facts(const Environ& env);

}  // namespace ddprun::launcher

#pragma once
/// FleetConfig: a job launched on several hosts over ssh from one command (--hostfile, -H), as
/// part of LaunchConfig; and the pure steps that make it: the flags read, the hosts chosen, the
/// per-host agent command line. Nothing here runs ssh (fleet.hpp does).
#include <optional>
#include <string>
#include <vector>

#include "launcher/fleet/hostfile.hpp"
#include "launcher/fleet/ssh_command.hpp"

namespace ddprun::launcher {

struct LaunchConfig;

struct FleetConfig {
  /// The job's hosts in node-rank order; empty = no launch over ssh (this node only).
  std::vector<HostSlot> hosts;
  SshSettings ssh;
  std::vector<std::string> exports;  ///< --env-export names (kDefaultExports are added later)
  /// The options as given, spelled out, less the fleet's own: what every host's agent gets first.
  std::vector<std::string> agent_options;
  bool nnodes_given = false;  ///< --nnodes was given (else: the number of hosts)
  bool endpoint_made = false;  ///< c10d's --rdzv-endpoint is the first host's, made here (else the user's)
};

/// A fleet flag's value and how a message names it ("--hostfile" or "--hostfile (from PET_HOSTFILE)").
struct FlagValue {
  std::string value;
  std::string label;
};

/// The fleet's flags as the command line gave them.
struct FleetFlags {
  std::optional<FlagValue> hostfile, hosts, include, exclude, ssh_port, env_export, nnodes, node_rank;
  std::vector<std::string> ssh_options;  ///< every --ssh-option, in order
  std::optional<std::string> hostfile_text;  ///< the hostfile's content, read by the caller
};

/// The hostfile's text; UsageError "LABEL FILE: cannot read: WHY" when it cannot be read.
std::string read_hostfile(const std::string& path, const std::string& label);

/// The options before PROGRAM (`spelled`: long names in full) without the fleet's own (--hostfile,
/// -H/--hosts, --include, --exclude, --ssh-port, --ssh-option, --env-export) and their values.
std::vector<std::string> without_fleet_options(const std::vector<std::string>& options);

/// Fills config.fleet from `flags` and fits the rendezvous to the hosts: --nnodes defaults to their
/// number (static: it must be that number), node 0 = the first host (static: --master-addr; c10d:
/// --rdzv-endpoint HOST0:29400 unless given). Without --hostfile/-H, any other fleet flag is a
/// UsageError, as are --node-rank (the host order decides it), --hostfile with -H, and
/// --standalone. `timings` reads DDPRUN_SSH_* (name -> value).
void resolve_fleet(LaunchConfig& config, const FleetFlags& flags, std::vector<std::string> agent_options,
                   const std::optional<std::string>& connect_timeout, const std::optional<std::string>& alive_timeout);

/// The argv of host `node`'s agent: ddprun's path, the user's options, then the host's own
/// (which win: the last value of an option counts) and `--`, PROGRAM, ARGS.
std::vector<std::string> agent_argv(const LaunchConfig& config, int node, const std::string& ddprun_path);

}  // namespace ddprun::launcher

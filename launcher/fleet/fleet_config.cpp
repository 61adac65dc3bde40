#include "launcher/fleet/fleet_config.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "launcher/cli/cli_options.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/cli/launch_config.hpp"
#include "rendezvous/endpoint.hpp"

namespace ddprun::launcher {
namespace {

constexpr Option kFleetOptions[] = {Option::hostfile, Option::hosts,      Option::include,   Option::exclude,
                                    Option::ssh_port, Option::ssh_option, Option::env_export};

bool is_fleet_option(const OptionSpec* spec) {
  if (spec == nullptr) return false;
  for (Option option : kFleetOptions) {
    if (spec->id == option) return true;
  }
  return false;
}

int seconds_from(const std::optional<std::string>& value, const char* name, int fallback) {
  if (!value || value->empty()) return fallback;
  const std::string& text = *value;
  bool digits = text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(text) < 1) {
    throw UsageError(std::string(name) + "=" + text + ": is not a number of seconds (an integer >= 1)");
  }
  return std::stoi(text);
}

}  // namespace

std::string read_hostfile(const std::string& path, const std::string& label) {
  auto cannot_read = [&](const std::string& why) { return UsageError(label + " " + path + ": cannot read: " + why); };
  // A folder opens (and an ifstream reads it as empty: "lists no host"); say what it is instead.
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) throw cannot_read("it is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw cannot_read(std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> without_fleet_options(const std::vector<std::string>& options) {
  std::vector<std::string> kept;
  for (std::size_t i = 0; i < options.size(); ++i) {
    const std::string& arg = options[i];
    if (arg == "--") break;
    if (arg.starts_with("--")) {
      auto eq = arg.find('=');
      const OptionSpec* spec = find_long(std::string_view(arg).substr(2, eq == std::string::npos ? arg.npos : eq - 2));
      if (!is_fleet_option(spec)) {
        kept.push_back(arg);
        if (spec != nullptr && !is_flag(*spec) && eq == std::string::npos && i + 1 < options.size()) kept.push_back(options[++i]);
        continue;
      }
      if (eq == std::string::npos) ++i;  // its value
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      kept.push_back(arg);
      continue;
    }
    // A cluster of short options; the first that takes a value takes the rest of it (or the next argument).
    std::string cluster = "-";
    bool takes_next = false, dropped = false;
    for (std::size_t j = 1; j < arg.size(); ++j) {
      const OptionSpec* spec = find_short(arg[j]);
      if (spec == nullptr || is_flag(*spec)) {
        cluster += arg[j];
        continue;
      }
      if (is_fleet_option(spec)) {
        dropped = true;
      } else {
        cluster += arg.substr(j);
      }
      takes_next = j + 1 == arg.size();
      break;
    }
    if (cluster.size() > 1) kept.push_back(cluster);
    if (takes_next && i + 1 < options.size()) {
      ++i;
      if (!dropped) kept.push_back(options[i]);
    }
  }
  return kept;
}

void resolve_fleet(LaunchConfig& config, const FleetFlags& flags, std::vector<std::string> agent_options,
                   const std::optional<std::string>& connect_timeout, const std::optional<std::string>& alive_timeout) {
  FleetConfig& fleet = config.fleet;
  if (!flags.hostfile && !flags.hosts) {
    for (const auto* other : {&flags.include, &flags.exclude, &flags.ssh_port, &flags.env_export}) {
      if (*other) throw UsageError(other->value().label + ": needs --hostfile FILE or -H HOST[:SLOTS],...");
    }
    if (!flags.ssh_options.empty()) throw UsageError("--ssh-option: needs --hostfile FILE or -H HOST[:SLOTS],...");
    return;
  }
  if (flags.hostfile && flags.hosts) {
    throw UsageError(flags.hosts->label + ": cannot be used with --hostfile (give the hosts one way)");
  }
  const FlagValue& source = flags.hostfile ? *flags.hostfile : *flags.hosts;
  if (config.standalone) throw UsageError(source.label + ": cannot be used with --standalone (one node)");
  if (flags.node_rank) {
    throw UsageError(flags.node_rank->label + ": cannot be used with " + source.label +
                     " (each host's node rank is its place in the list)");
  }
  std::vector<HostSlot> hosts = flags.hostfile ? parse_hostfile(flags.hostfile_text.value_or(""), flags.hostfile->value)
                                               : parse_host_list(flags.hosts->value, flags.hosts->label);
  fleet.hosts = select_hosts(std::move(hosts), flags.include ? flags.include->value : "",
                             flags.exclude ? flags.exclude->value : "");
  if (flags.ssh_port) {
    const std::string& text = flags.ssh_port->value;
    if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(text) < 1 || std::stoi(text) > 65535) {
      throw UsageError(flags.ssh_port->label + ": \"" + text + "\" is not a port number (1..65535)");
    }
    fleet.ssh.port = std::stoi(text);
  }
  for (const auto& option : flags.ssh_options) {
    if (option.find('=') == std::string::npos || option.front() == '=') {
      throw UsageError("--ssh-option: \"" + option + "\" is not KEY=VALUE (an ssh -o option, e.g. StrictHostKeyChecking=no)");
    }
    fleet.ssh.options.push_back(option);
  }
  if (flags.env_export) fleet.exports = parse_export_names(flags.env_export->value, flags.env_export->label);
  fleet.ssh.connect_timeout_s = seconds_from(connect_timeout, "DDPRUN_SSH_CONNECT_TIMEOUT", 10);
  fleet.ssh.alive_timeout_s = seconds_from(alive_timeout, "DDPRUN_SSH_ALIVE_TIMEOUT", 10);
  fleet.agent_options = without_fleet_options(agent_options);
  fleet.nnodes_given = flags.nnodes.has_value();

  const int count = static_cast<int>(fleet.hosts.size());
  Topology& topology = config.topology;
  const std::string first = host_address(fleet.hosts.front().destination);
  if (!fleet.nnodes_given) {
    topology.min_nodes = topology.max_nodes = count;
  } else if (config.rdzv_backend == RdzvBackend::static_ && (topology.min_nodes != count || topology.max_nodes != count)) {
    throw UsageError(flags.nnodes->label + ": asks for " + flags.nnodes->value + " nodes, but " + source.label + " gives " +
                     std::to_string(count) + " hosts (leave --nnodes out: it is the number of hosts)");
  } else if (count > topology.max_nodes) {
    throw UsageError(flags.nnodes->label + ": allows at most " + std::to_string(topology.max_nodes) + " nodes, but " +
                     source.label + " gives " + std::to_string(count) + " hosts");
  }
  if (config.rdzv_backend == RdzvBackend::static_) {
    config.master_addr = first;  // node 0 = the first host hosts the store
  } else if (config.rdzv_backend == RdzvBackend::c10d && !config.rdzv_endpoint) {
    config.rdzv_endpoint = rendezvous::Endpoint{first, kDefaultRdzvPort};
    fleet.endpoint_made = true;
  }
}

std::vector<std::string> agent_argv(const LaunchConfig& config, int node, const std::string& ddprun_path) {
  const FleetConfig& fleet = config.fleet;
  const HostSlot& host = fleet.hosts.at(static_cast<std::size_t>(node));
  std::vector<std::string> argv{ddprun_path};
  argv.insert(argv.end(), fleet.agent_options.begin(), fleet.agent_options.end());
  const Topology& topology = config.topology;
  if (!fleet.nnodes_given) argv.push_back("--nnodes=" + std::to_string(topology.max_nodes));
  if (config.rdzv_backend == RdzvBackend::static_) {
    argv.push_back("--node-rank=" + std::to_string(node));
    argv.push_back("--master-addr=" + config.master_addr);
  } else if (fleet.endpoint_made) {
    argv.push_back("--rdzv-endpoint=" + rendezvous::format_endpoint(config.rdzv_endpoint->host, config.rdzv_endpoint->port));
  }
  if (host.slots) argv.push_back("--nproc-per-node=" + std::to_string(*host.slots));
  argv.push_back("--stdin=none");  // the agent's stdin is the launcher's keep-alive channel
  argv.push_back("--");
  argv.push_back(config.program);
  argv.insert(argv.end(), config.program_args.begin(), config.program_args.end());
  return argv;
}

}  // namespace ddprun::launcher

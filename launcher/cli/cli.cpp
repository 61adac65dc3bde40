#include "launcher/cli/cli.hpp"

#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <random>

#include "launcher/cli/cli_options.hpp"
#include "launcher/cli/cli_spelling.hpp"
#include "launcher/cli/cli_values.hpp"
#include "launcher/devices/devices.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/fleet/fleet_config.hpp"
#include "launcher/cli/preload_list.hpp"
#include "launcher/cli/program.hpp"
#include "launcher/fleet/slurm_env.hpp"
#include "launcher/observe/status_request.hpp"
#include "launcher/base/text.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/store_error.hpp"

namespace ddprun::launcher {
namespace {

// ---------------------------------------------------------------------------------------------
// Raw values and their source.

/// A value as given, and how to name its source in a message: "--nnodes" or
/// "--nnodes (from PET_NNODES)".
struct Raw {
  std::string value;
  std::string label;
};

[[noreturn]] void reject(const Raw& raw, std::string_view why) { reject_value(raw.value, raw.label, why); }

/// The command-line results of CLI11 and the environment, by option handle.
class Settings {
 public:
  explicit Settings(const Environ& env) : env_(env) {}

  void bind(Option option, CLI::Option* given) { given_[static_cast<std::size_t>(option)] = given; }

  /// The option's value and where it came from; nothing when neither the command line nor its
  /// PET_* variable gives one.
  std::optional<Raw> get(Option option) const {
    const OptionSpec& spec = spec_of(option);
    const CLI::Option* given = given_[static_cast<std::size_t>(option)];
    if (given->count() > 0) {
      const std::string& value = given->results().back();
      // `--log-dir=` from a template: the default, not the PET_* value (torchrun: the command line wins).
      if (value.empty() && spec.empty_is_default) return std::nullopt;
      return Raw{value, dash_name(spec)};
    }
    std::string pet = pet_name(spec);
    if (auto value = lookup(env_, pet); value && !value->empty()) {
      return Raw{*value, dash_name(spec) + " (from " + pet + ")"};
    }
    return fallback_[static_cast<std::size_t>(option)];
  }

  /// The value `option` takes when neither the command line nor PET_* gives one (Slurm's).
  void fall_back(Option option, Raw raw) { fallback_[static_cast<std::size_t>(option)] = std::move(raw); }

  const Environ& environment() const { return env_; }

  /// Every value the command line gave a repeatable option (--ssh-option), in order.
  std::vector<std::string> all(Option option) const { return given_[static_cast<std::size_t>(option)]->results(); }

  /// A flag: given on the command line (CLI11 records "true", or the text after '='), or a
  /// PET_* boolean.
  bool flag(Option option) const {
    auto raw = get(option);
    return raw && parse_boolean(raw->value, raw->label);
  }

 private:
  const Environ& env_;
  std::array<const CLI::Option*, static_cast<std::size_t>(Option::count_)> given_{};  ///< every one bound
  std::array<std::optional<Raw>, static_cast<std::size_t>(Option::count_)> fallback_{};
};

/// 16 random bytes laid out as a version-4 UUID.
std::array<unsigned char, 16> random_uuid4() {
  std::random_device device;
  std::mt19937_64 engine((static_cast<std::uint64_t>(device()) << 32) ^ device());
  std::array<unsigned char, 16> bytes{};
  for (auto& b : bytes) b = static_cast<unsigned char>(engine());
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0F) | 0x40);  // version 4
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3F) | 0x80);  // RFC 4122 variant
  return bytes;
}

/// torchrun's uuid4 run id for --standalone: str(uuid.uuid4()).
std::string random_run_id() {
  auto bytes = random_uuid4();
  std::string id;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) id += '-';
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", bytes[i]);
    id += hex;
  }
  return id;
}

/// torchrun's run id when --rdzv-id is given empty: str(uuid.uuid4().int), a decimal number.
std::string random_decimal_run_id() {
  auto number = random_uuid4();  // big-endian base 256, divided by 10 until nothing is left
  std::string digits;
  do {
    unsigned remainder = 0;
    for (auto& byte : number) {
      unsigned current = remainder * 256 + byte;
      byte = static_cast<unsigned char>(current / 10);
      remainder = current % 10;
    }
    digits.insert(digits.begin(), static_cast<char>('0' + remainder));
  } while (std::any_of(number.begin(), number.end(), [](unsigned char b) { return b != 0; }));
  return digits;
}

// ---------------------------------------------------------------------------------------------
// The command line itself.

/// CLI11 takes the next argument as a value even when it is another option. argparse refuses
/// that; so does ddprun: it is a typo that would otherwise swallow PROGRAM or a flag. `args` are
/// spelled out (spell_out_options: `--opt=` is already `--opt ""`); `consumed` = the arguments
/// before PROGRAM.
void check_option_values(const std::vector<std::string>& args, std::size_t consumed) {
  for (std::size_t i = 0; i < consumed; ++i) {
    std::string_view arg = args[i];
    if (arg == "--") return;
    const OptionSpec* spec = nullptr;
    if (arg.starts_with("--")) {
      auto eq = arg.find('=');
      spec = find_long(arg.substr(2, eq == std::string_view::npos ? arg.npos : eq - 2));
      if (spec == nullptr || is_flag(*spec)) continue;
      if (eq != std::string_view::npos) continue;
    } else if (arg.size() > 1 && arg[0] == '-') {
      // A cluster of short options, the last of which may take a value: -mr3, -mr 3.
      std::size_t j = 1;
      for (; j < arg.size(); ++j) {
        spec = find_short(arg[j]);
        if (spec != nullptr && !is_flag(*spec)) break;
        spec = nullptr;
      }
      if (spec == nullptr || j + 1 < arg.size()) continue;
    } else {
      continue;
    }
    if (i + 1 < consumed) {
      if (looks_like_option(args[i + 1])) {
        throw UsageError(dash_name(*spec) + ": needs a value, but is followed by the option " +
                         quote_for_message(args[i + 1]));
      }
      ++i;
    }
  }
}

/// CLI11's messages, made one line and led by the option: "--nnodes: 1 required  missing" ->
/// "--nnodes: needs a value".
UsageError from_cli11(const CLI::ParseError& e) {
  std::string what = e.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    auto colon = what.find(':');
    if (colon != std::string::npos && what.starts_with("-")) return UsageError(what.substr(0, colon) + ": needs a value");
  }
  std::string line = quote_for_message(what);
  return UsageError(line.substr(1, line.size() - 2));
}

/// One of a fixed set of words, e.g. `--pty on`.
template <typename E>
E parse_choice(const Raw& raw, std::initializer_list<std::pair<std::string_view, E>> choices) {
  std::string names;
  for (const auto& [word, value] : choices) {
    if (raw.value == word) return value;
    names += names.empty() ? "" : ", ";
    names += word;
  }
  reject(raw, "is not one of " + names);
}

/// torchrun reads LOGLEVEL (Python's logging level names) for its own messages.
bool loglevel_is_verbose(const Environ& env) {
  auto level = lookup(env, "LOGLEVEL");
  if (!level) return false;
  std::string upper;
  for (char c : *level) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return upper == "INFO" || upper == "DEBUG" || upper == "NOTSET";
}

ProgramMode decide_mode(const Settings& settings, const std::string& program, const Environ& env) {
  bool module = settings.flag(Option::module);
  bool no_python = settings.flag(Option::no_python);
  bool run_path = settings.flag(Option::run_path);
  if (module && no_python) throw UsageError("--no-python: cannot be used with -m/--module (a module needs python)");
  if (run_path && no_python) throw UsageError("--run-path: cannot be used with --no-python (it runs python)");
  if (run_path && module) throw UsageError("--run-path: cannot be used with -m/--module (it runs a file)");
  if (module) return ProgramMode::python_module;
  if (no_python) return ProgramMode::executable;
  if (run_path || program.ends_with(".py")) return ProgramMode::python_script;
  return find_program(program, env) ? ProgramMode::executable : ProgramMode::python_script;
}

void fill_membership(LaunchConfig& config, const Settings& settings) {
  Topology& topology = config.topology;
  if (auto raw = settings.get(Option::nnodes)) {
    std::tie(topology.min_nodes, topology.max_nodes) = parse_nnodes(raw->value, raw->label);
  }
  if (auto raw = settings.get(Option::master_addr)) {
    require_non_empty(raw->value, raw->label);
    config.master_addr = raw->value;
  }
  if (auto raw = settings.get(Option::master_port)) {
    config.master_port = integer_in(raw->value, raw->label, 0, 65535, "is not a port number (0..65535)");
  }
  if (auto raw = settings.get(Option::rdzv_conf)) {
    config.rdzv_conf = parse_rdzv_conf(raw->value, raw->label, config.rendezvous);
  }
  if (auto raw = settings.get(Option::local_addr)) config.local_addr = raw->value;

  config.standalone = settings.flag(Option::standalone);
  if (config.standalone) {
    // torchrun ignores the user's rendezvous values here; so does ddprun, unvalidated.
    if (topology.max_nodes > 1) {
      auto raw = settings.get(Option::nnodes);
      throw UsageError("--standalone: runs one node, but " + raw->label + " asks for " + raw->value);
    }
    config.rdzv_backend = RdzvBackend::c10d;
    config.rdzv_endpoint = rendezvous::Endpoint{"localhost", 0};
    config.rdzv_id = random_run_id();
  } else {
    if (auto raw = settings.get(Option::rdzv_backend)) {
      if (auto backend = rendezvous::backend_named(raw->value)) config.rdzv_backend = *backend;
      else if (raw->value == "etcd" || raw->value == "etcd-v2") {
        reject(*raw, "is torchrun's backend for etcd's v2 API, which etcd 3.4 turns off; ddprun's etcd-v3 speaks "
                     "etcd's v3 API with the same --rdzv-endpoint and --rdzv-conf keys");
      } else {
        reject(*raw, "is not a rendezvous backend (" + rendezvous::backend_names() + ")");
      }
    }
    // Blank text (a template's "$UNSET " or PET_RDZV_ENDPOINT=" ") leaves it unset, as "--rdzv-endpoint=" does.
    if (auto raw = settings.get(Option::rdzv_endpoint); raw && !trim(raw->value).empty()) {
      if (config.rdzv_backend == RdzvBackend::etcd_v3) {
        try {
          config.etcd = rendezvous::parse_etcd_options(raw->value, config.rdzv_conf.etcd);
        } catch (const rendezvous::Error& error) {
          reject(*raw, std::string("is not an etcd-v3 rendezvous (") + error.what() + ")");
        }
        config.rdzv_endpoint = config.etcd->endpoints.front();
      } else {
        config.rdzv_endpoint = parse_endpoint(raw->value, kDefaultRdzvPort, raw->label);
      }
    }
    if (auto raw = settings.get(Option::rdzv_id); raw && raw->value.empty()) {
      // Only the command line gives an empty value (an empty PET_* is unset): `--rdzv-id=` from a
      // template. torchrun then makes up a random id, so does ddprun.
      config.rdzv_id = random_decimal_run_id();
    } else if (raw) {
      // The run id names the job's folder under --log-dir: it must not climb out of it.
      if (raw->value == "." || raw->value == ".." || raw->value.find('/') != std::string::npos) {
        reject(*raw, "is not a run id: it names the job's log folder, so it cannot be \".\", \"..\" or hold \"/\"");
      }
      config.rdzv_id = raw->value;
    }
  }
  if (auto raw = settings.get(Option::node_rank)) {
    topology.node_rank = integer_in(raw->value, raw->label, 0, kIntMax, "is not a node rank (an integer >= 0)");
    if (topology.node_rank >= topology.max_nodes) {
      reject(*raw, "is not below the number of nodes, " + std::to_string(topology.max_nodes) + " (--nnodes)");
    }
  }
}

/// The rendezvous as the agent runs it, from the membership and worker values: whether rounds are
/// needed, where the store is, and every rule of the rounds.
void resolve_rendezvous(LaunchConfig& config) {
  Topology& topology = config.topology;
  const bool is_static = config.rdzv_backend == RdzvBackend::static_;
  topology.multi_node = topology.max_nodes > 1 || (!is_static && !config.standalone);
  if (is_static) {
    config.store_endpoint = rendezvous::Endpoint{config.master_addr, config.master_port};
  } else if (config.rdzv_endpoint) {
    config.store_endpoint = *config.rdzv_endpoint;
  } else {
    // c10d without --standalone is always multi-node, and the nodes must meet somewhere.
    if (config.rdzv_backend == RdzvBackend::etcd_v3) {
      throw UsageError("--rdzv-backend=etcd-v3 needs --rdzv-endpoint HOST[:PORT][,HOST[:PORT]...] (the etcd members)");
    }
    throw UsageError("--rdzv-backend=c10d needs --rdzv-endpoint HOST[:PORT] (the machine that hosts the store)");
  }
  rendezvous::RendezvousSettings& rules = config.rendezvous;  // --rdzv-conf's keys are already in
  rules.run_id = config.rdzv_id;
  rules.is_static = is_static;
  rules.min_nodes = topology.min_nodes;
  rules.max_nodes = topology.max_nodes;
  rules.max_restarts = config.max_restarts;
  rules.static_rank = is_static ? topology.node_rank : -1;
  // Static jobs with --worker-store agent (the default): workers use node 0's store on
  // --master-port, as torchrun's do. c10d keeps a fresh store per round, as torchrun does.
  rules.agent_worker_store = is_static && config.worker_store == WorkerStore::agent;
}

/// The CUDA_VISIBLE_DEVICES of each local rank: `visible` (nothing: devices 0..count-1) divided
/// among the workers, --devices-per-worker each; with 0, every worker inherits the variable.
void assign_worker_devices(LaunchConfig& config, const std::optional<VisibleDevices>& visible,
                           const HostFacts& facts) {
  const int nproc = config.topology.nproc_per_node;
  config.devices.assign(static_cast<std::size_t>(nproc), std::nullopt);
  if (config.devices_per_worker == 0) return;
  std::vector<std::string> names;
  if (visible) {
    names = visible->names;
  } else {
    for (int i = 0; i < facts.device_count; ++i) names.push_back(std::to_string(i));
  }
  auto assigned = assign_devices(names, config.devices_per_worker, nproc, facts.device_source);
  for (std::size_t i = 0; i < config.devices.size(); ++i) config.devices[i] = assigned.at(i);
}

/// --virtual-local-rank without --devices-per-worker: as torchrun 2.11, worker i gets the i-th
/// entry of CUDA_VISIBLE_DEVICES as given (no driver asked), or "i" when the variable is unset.
void assign_virtual_devices(LaunchConfig& config, const Environ& env) {
  if (!config.virtual_local_rank || config.devices_per_worker > 0) return;  // each already has its own
  auto visible = lookup(env, "CUDA_VISIBLE_DEVICES");
  std::vector<std::string_view> entries;
  if (visible) entries = split(*visible, ',');
  for (std::size_t i = 0; i < config.devices.size(); ++i) {
    if (!visible) {
      config.devices[i] = std::to_string(i);
      continue;
    }
    if (i >= entries.size()) {
      throw UsageError("--virtual-local-rank: local rank " + std::to_string(i) + " has no GPU of its own: CUDA_VISIBLE_DEVICES=" +
                       *visible + " lists " + std::to_string(entries.size()) + " (start fewer workers, or list more GPUs)");
    }
    config.devices[i] = std::string(trim(entries[i]));
  }
}

/// `--event-log-handler`: torchrun hands its events to a Python logging handler by this name.
void note_event_log_handler(LaunchConfig& config, const std::optional<Raw>& raw) {
  if (!raw || raw->value == "null") return;
  config.notices.push_back(raw->label + "=" + raw->value + ": no effect under ddprun (it names a handler of torchrun's "
                           "Python event log); ddprun writes the job's events with --events FILE");
}

/// `--logs-specs`: torchrun loads a Python class of the `torchrun.logs_specs` entry points by this name.
void note_logs_specs(LaunchConfig& config, const std::optional<Raw>& raw) {
  if (!raw || raw->value == "default") return;
  config.notices.push_back(raw->label + "=" + raw->value + ": no effect under ddprun (it names a Python plugin of "
                           "torchrun's torchrun.logs_specs entry points); ddprun's log files: --log-dir, -r, -t");
}

/// torchrun's comma_separated_list: "a,b" -> {"a", "b"}. An empty entry would match every line, so
/// none is kept.
std::vector<std::string> parse_filters(const std::optional<Raw>& raw) {
  std::vector<std::string> filters;
  if (!raw) return filters;
  for (auto& entry : split(raw->value, ',')) {
    if (!entry.empty()) filters.emplace_back(entry);
  }
  return filters;
}

void fill_workers(LaunchConfig& config, const Settings& settings, const HostFacts& host) {
  if (auto raw = settings.get(Option::devices_per_worker)) {
    config.devices_per_worker = integer_in(raw->value, raw->label, 0, kIntMax, "is not a count (an integer >= 0)");
  }
  HostFacts facts = host;  // the devices are counted only where the count matters
  std::optional<VisibleDevices> counted;
  auto nproc = settings.get(Option::nproc_per_node);
  if (facts.count_devices && (config.devices_per_worker > 0 || (nproc && (nproc->value == "gpu" || nproc->value == "auto")))) {
    counted = facts.count_devices();
    facts.device_count = static_cast<int>(counted->names.size());
    facts.device_source = counted->source;
    config.device_source = counted->source;
  }
  Topology& topology = config.topology;
  if (nproc) topology.nproc_per_node = parse_nproc(nproc->value, nproc->label, facts, config.devices_per_worker);
  require_devices(config.devices_per_worker, topology.nproc_per_node, facts.device_count, facts.device_source);
  assign_worker_devices(config, counted, facts);
  config.virtual_local_rank = settings.flag(Option::virtual_local_rank);
  assign_virtual_devices(config, settings.environment());
  if (auto raw = settings.get(Option::numa_binding)) {
    config.numa_binding = parse_choice<NumaMode>(*raw, {{"node", NumaMode::node},
                                                        {"socket", NumaMode::socket},
                                                        {"exclusive", NumaMode::exclusive},
                                                        {"core-complex", NumaMode::core_complex}});
  }
  note_event_log_handler(config, settings.get(Option::event_log_handler));
  if (auto raw = settings.get(Option::role)) {
    require_non_empty(raw->value, raw->label);
    config.role = raw->value;
  }
  if (auto raw = settings.get(Option::max_restarts)) {
    config.max_restarts = integer_in(raw->value, raw->label, 0, kIntMax, "is not a count (an integer >= 0)");
  }
  if (auto raw = settings.get(Option::monitor_interval)) {
    auto seconds = to_number(raw->value);
    if (!seconds || *seconds <= 0) reject(*raw, "is not a number of seconds > 0");
    config.monitor_interval_s = *seconds;
  }
  if (auto raw = settings.get(Option::shutdown_timeout)) {
    auto seconds = to_number(raw->value);
    if (!seconds || *seconds < 0) reject(*raw, "is not a number of seconds >= 0");
    config.shutdown_timeout_s = *seconds;
  }
  if (auto raw = settings.get(Option::hang_timeout)) {
    auto seconds = to_number(raw->value);
    if (!seconds || *seconds < 0) reject(*raw, "is not a number of seconds >= 0");
    config.hang_timeout_s = *seconds;
  }
  if (auto raw = settings.get(Option::hang_action)) {
    config.hang_action = parse_choice<HangAction>(
        *raw, {{"report", HangAction::report}, {"stop", HangAction::stop}, {"restart", HangAction::restart}});
  }
  if (auto raw = settings.get(Option::gpu_health)) {
    config.gpu_health = parse_choice<bool>(*raw, {{"on", true}, {"off", false}});
  }
  if (auto raw = settings.get(Option::gpu_release_timeout)) {
    auto seconds = to_number(raw->value);
    if (!seconds || *seconds < 0 || *seconds > 86400) reject(*raw, "is not a number of seconds from 0 to 86400");
    config.gpu_release_timeout_s = *seconds;
  }
  if (auto raw = settings.get(Option::signals_to_handle)) {
    config.signals_to_handle = parse_signals(raw->value, raw->label);
  }
  if (auto raw = settings.get(Option::forward_signals)) {
    config.signals_to_forward = raw->value == "none" ? std::vector<int>{} : parse_signals(raw->value, raw->label);
  }
  if (auto raw = settings.get(Option::start_method)) {
    parse_choice<int>(*raw, {{"fork", 0}, {"spawn", 0}, {"forkserver", 0}});
    config.start_method = raw->value;
  }
  if (auto raw = settings.get(Option::worker_store)) {
    config.worker_store = parse_choice<WorkerStore>(*raw, {{"agent", WorkerStore::agent}, {"fresh", WorkerStore::fresh}});
  }
}

/// --hostfile / -H and their companions (fleet_config.hpp); `options`: those before PROGRAM.
void fill_fleet(LaunchConfig& config, const Settings& settings, std::vector<std::string> options) {
  auto value = [&](Option option) -> std::optional<FlagValue> {
    if (auto raw = settings.get(option)) return FlagValue{raw->value, raw->label};
    return std::nullopt;
  };
  FleetFlags flags{value(Option::hostfile), value(Option::hosts),      value(Option::include), value(Option::exclude),
                   value(Option::ssh_port), value(Option::env_export), value(Option::nnodes),  value(Option::node_rank),
                   {},                      std::nullopt};
  flags.ssh_options = settings.all(Option::ssh_option);
  if (flags.hostfile && !flags.hosts) flags.hostfile_text = read_hostfile(flags.hostfile->value, flags.hostfile->label);
  const Environ& env = settings.environment();
  resolve_fleet(config, flags, std::move(options), lookup(env, "DDPRUN_SSH_CONNECT_TIMEOUT"),
                lookup(env, "DDPRUN_SSH_ALIVE_TIMEOUT"));
}

/// DDPRUN_STORE_TOKEN(_FILE): set wrongly, it is the user's setting to fix, before anything starts.
std::optional<std::string> read_store_token(const Environ& env) {
  try {
    return rendezvous::auth::token_from_environment([&env](const char* name) { return lookup(env, name); });
  } catch (const rendezvous::StoreError& error) {
    throw UsageError(error.what());
  }
}

void fill_output(LaunchConfig& config, const Settings& settings) {
  if (auto raw = settings.get(Option::log_dir)) config.log_dir = raw->value;
  if (auto raw = settings.get(Option::redirects)) config.redirects = parse_streams(raw->value, raw->label);
  if (auto raw = settings.get(Option::tee)) config.tee = parse_streams(raw->value, raw->label);
  if (auto raw = settings.get(Option::local_ranks_filter)) {
    config.local_ranks_filter = parse_rank_filter(raw->value, raw->label, config.topology.nproc_per_node);
  }
  config.duplicate_stdout_filters = parse_filters(settings.get(Option::duplicate_stdout_filters));
  config.duplicate_stderr_filters = parse_filters(settings.get(Option::duplicate_stderr_filters));
  note_logs_specs(config, settings.get(Option::logs_specs));
  if (auto raw = settings.get(Option::log_line_prefix_template)) {
    check_prefix_template(raw->value, raw->label);
    config.log_line_prefix_template = raw->value;
  }
  if (auto raw = settings.get(Option::pty)) {
    config.pty = parse_choice<PtyMode>(*raw, {{"auto", PtyMode::automatic}, {"on", PtyMode::on}, {"off", PtyMode::off}});
  }
  if (auto raw = settings.get(Option::status)) {
    config.status = parse_choice<StatusMode>(*raw, {{"auto", StatusMode::automatic}, {"on", StatusMode::on}, {"off", StatusMode::off}});
  }
  if (auto raw = settings.get(Option::status_interval)) {
    auto seconds = to_number(raw->value);
    if (!seconds || *seconds < 0) reject(*raw, "is not a number of seconds >= 0");
    config.status_interval_s = *seconds;
  }
  if (auto raw = settings.get(Option::stdin_target)) {
    config.stdin_target = parse_choice<StdinTarget>(
        *raw, {{"none", StdinTarget::none}, {"rank0", StdinTarget::rank0}, {"all", StdinTarget::all}});
  }
  config.verbose = settings.flag(Option::verbose) || loglevel_is_verbose(settings.environment());
  if (auto raw = settings.get(Option::events)) {
    require_non_empty(raw->value, raw->label);
    config.events_file = raw->value;
  }
  if (auto raw = settings.get(Option::preload)) {
    PreloadList list = parse_preload_list(raw->value);
    if (!list.error.empty()) reject(*raw, list.error);
    config.preload = std::move(list.modules);
  }
}

/// --status-port and --status-host; after the store token, which an endpoint beyond loopback needs.
void fill_status_endpoint(LaunchConfig& config, const Settings& settings) {
  if (auto raw = settings.get(Option::status_port)) {
    config.status_port = integer_in(raw->value, raw->label, 0, 65535, "is not a port number (0..65535)");
  }
  auto host = settings.get(Option::status_host);
  if (!host) return;
  require_non_empty(host->value, host->label);
  if (!config.status_port) reject(*host, "needs --status-port: the address is where that port is bound");
  config.status_host = std::string(rendezvous::without_brackets(host->value));
  if (!config.store_token && !is_loopback_address(config.status_host)) {
    reject(*host, "is not a loopback address, so the status endpoint requires the store token: set "
                  "DDPRUN_STORE_TOKEN or DDPRUN_STORE_TOKEN_FILE, or bind 127.0.0.1");
  }
}

}  // namespace

HostFacts read_host_facts(const Environ& env) {
  HostFacts facts;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    facts.cpu_count = CPU_COUNT(&set);
  } else {
    facts.cpu_count = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  }
  facts.cpu_count = std::max(facts.cpu_count, 1);
  facts.count_devices = [env] {
    return decide_visible_devices(probe_devices(device_probe_settings(lookup(env, "DDPRUN_TEST_DEVICE_ROOT"))), env);
  };
  return facts;
}

CommandLine parse_command_line(const std::vector<std::string>& args, const Environ& env, const HostFacts& host) {
  CLI::App app{"ddprun", "ddprun"};
  app.prefix_command();  // the first positional argument is PROGRAM; it and all after it are left over
  app.set_help_flag("-h,--help");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // as argparse
  CLI::Option* version = app.add_flag("--version");
  Settings settings(env);
  for (const auto& spec : option_table()) {
    std::string names = cli11_names(spec);
    settings.bind(spec.id, is_flag(spec) ? app.add_flag(names) : app.add_option(names));
  }

  // argparse's habits first (unique prefixes, `--opt=`): CLI11 then sees full names only.
  const std::vector<std::string> spelled = spell_out_options(args);
  std::vector<std::string> reversed(spelled.rbegin(), spelled.rend());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return InfoText{help_text()};
  } catch (const CLI::ParseError& e) {
    throw from_cli11(e);
  }
  if (version->count() > 0) return InfoText{"ddprun " DDPRUN_VERSION "\n"};

  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && looks_like_option(rest.front()) && rest.front() != "--") {
    std::string line = quote_for_message(rest.front());
    throw UsageError(line.substr(1, line.size() - 2) + ": unknown option");
  }
  // With no unknown option, `rest` is a suffix of `spelled`: everything before it was options.
  const std::size_t consumed = spelled.size() - rest.size();
  check_option_values(spelled, consumed);
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());

  // Inside a Slurm allocation, Slurm's values stand in for the options left out (slurm_env.hpp).
  if (auto step = read_slurm_step(env)) {
    auto given = [&settings](Option option) -> std::optional<GivenValue> {
      if (auto raw = settings.get(option)) return GivenValue{raw->value, raw->label};
      return std::nullopt;
    };
    for (auto& value : slurm_defaults(*step, given)) settings.fall_back(value.option, Raw{value.value, value.label});
  }
  LaunchConfig config;
  fill_membership(config, settings);
  fill_workers(config, settings, host);
  fill_output(config, settings);
  if (rest.empty()) throw UsageError("PROGRAM: missing; usage: ddprun [options] PROGRAM [ARGS...]");
  config.program = rest.front();
  config.program_args.assign(rest.begin() + 1, rest.end());
  config.no_python = settings.flag(Option::no_python);
  config.use_env = settings.flag(Option::use_env);
  if (auto raw = settings.get(Option::append_local_rank)) {
    config.append_local_rank = parse_choice<LocalRankArg>(
        *raw, {{"off", LocalRankArg::off}, {"dash", LocalRankArg::dash}, {"underscore", LocalRankArg::underscore}});
  }
  if (config.use_env && config.append_local_rank != LocalRankArg::off) {
    // torch.distributed.launch's --use_env is what turns its --local_rank argument off.
    throw UsageError("--append-local-rank: cannot be used with --use-env (--use_env told torch.distributed.launch "
                     "not to pass --local_rank; leave one of them out)");
  }
  config.mode = decide_mode(settings, config.program, env);
  fill_fleet(config, settings, std::vector<std::string>(spelled.begin(), spelled.begin() + static_cast<std::ptrdiff_t>(consumed)));
  resolve_rendezvous(config);
  config.store_token = read_store_token(env);
  fill_status_endpoint(config, settings);
  return config;
}

}  // namespace ddprun::launcher

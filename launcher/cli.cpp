#include "cli.hpp"

#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>
#include <random>
#include <set>

#include "devices.hpp"
#include "errors.hpp"
#include "program.hpp"
#include "signal_names.hpp"

#ifndef DDPRUN_VERSION
#define DDPRUN_VERSION "0.1.0"  // keep in step with project() in the top CMakeLists.txt
#endif

namespace ddprun::launcher {
namespace {

// ---------------------------------------------------------------------------------------------
// The option table: drives CLI11, the PET_* names, the --help text and the value checks.

enum class Group { membership, workers, output, program };

struct OptionSpec {
  std::string_view name;      ///< long name with '-', e.g. "nproc-per-node"; '_' spelling is derived
  char short_name;            ///< 0 when none
  std::string_view metavar;   ///< empty for a flag (an option without a value)
  std::string_view fallback;  ///< the default, as --help shows it
  Group group;
  std::string_view help;
};

constexpr std::array kOptions{
    OptionSpec{"nnodes", 0, "N|MIN:MAX", "1", Group::membership, "nodes in the job; MIN:MAX = elastic"},
    OptionSpec{"node-rank", 0, "R", "0", Group::membership, "this node's rank (static rendezvous)"},
    OptionSpec{"master-addr", 0, "HOST", "127.0.0.1", Group::membership, "static rendezvous: address of node 0"},
    OptionSpec{"master-port", 0, "PORT", "29500", Group::membership, "static rendezvous: store port on node 0"},
    OptionSpec{"rdzv-backend", 0, "NAME", "static", Group::membership, "static or c10d"},
    OptionSpec{"rdzv-endpoint", 0, "HOST[:PORT]", "none", Group::membership,
               "c10d store; [v6addr]:PORT for IPv6; PORT defaults to 29400"},
    OptionSpec{"rdzv-id", 0, "ID", "none", Group::membership, "job id (TORCHELASTIC_RUN_ID, log folder prefix)"},
    OptionSpec{"rdzv-conf", 0, "K=V,...", "none", Group::membership,
               "join_timeout=600,last_call_timeout=30,is_host=1,..."},
    OptionSpec{"standalone", 0, "", "off", Group::membership,
               "one node: c10d on localhost, a free port, a random id"},
    OptionSpec{"local-addr", 0, "HOST", "hostname", Group::membership, "this node's address as other nodes see it"},
    OptionSpec{"nproc-per-node", 0, "N|gpu|cpu|auto", "1", Group::workers,
               "workers on this node; gpu/auto count CUDA devices"},
    OptionSpec{"devices-per-worker", 0, "K", "0", Group::workers,
               "CUDA devices per worker; 0 = all inherit CUDA_VISIBLE_DEVICES"},
    OptionSpec{"role", 0, "NAME", "default", Group::workers, "worker role (ROLE_NAME)"},
    OptionSpec{"max-restarts", 0, "N", "0", Group::workers, "worker-group restarts before the job fails"},
    OptionSpec{"monitor-interval", 0, "SECONDS", "0.1", Group::workers,
               "accepted for torchrun; ddprun reacts to exits at once"},
    OptionSpec{"shutdown-timeout", 0, "SECONDS", "30", Group::workers, "grace between the signal and SIGKILL"},
    OptionSpec{"signals-to-handle", 0, "SIG,...", "SIGTERM,SIGINT,SIGHUP,SIGQUIT", Group::workers,
               "signals that stop the job"},
    OptionSpec{"log-dir", 0, "DIR", "a temp dir", Group::output, "base folder of the per-worker logs"},
    OptionSpec{"redirects", 'r', "0-3|LR:0-3,...", "0", Group::output,
               "to log files only: 1 stdout, 2 stderr, 3 both; LR = local rank"},
    OptionSpec{"tee", 't', "0-3|LR:0-3,...", "0", Group::output, "as -r, and to the console with a prefix"},
    OptionSpec{"local-ranks-filter", 0, "LR,...", "all", Group::output,
               "local ranks whose output reaches the console"},
    OptionSpec{"log-line-prefix-template", 0, "T", "none", Group::output,
               "console line prefix with ${role_name} ${rank} ${local_rank} ${hostname}"},
    OptionSpec{"module", 'm', "", "off", Group::program, "run python -u -m PROGRAM (PROGRAM is a module)"},
    OptionSpec{"no-python", 0, "", "off", Group::program, "exec PROGRAM directly, not through python"},
    OptionSpec{"run-path", 0, "", "off", Group::program, "accepted for torchrun; runs PROGRAM with python"},
};

bool is_flag(const OptionSpec& spec) { return spec.metavar.empty(); }

std::string dash_name(const OptionSpec& spec) { return "--" + std::string(spec.name); }

std::string pet_name(const OptionSpec& spec) {
  std::string pet = "PET_";
  for (char c : spec.name) pet += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return pet;
}

/// CLI11's name list: "-m,--module", "--nproc-per-node,--nproc_per_node".
std::string cli11_names(const OptionSpec& spec) {
  std::string names;
  if (spec.short_name != 0) names = std::string("-") + spec.short_name + ",";
  names += dash_name(spec);
  if (spec.name.find('-') != std::string_view::npos) {
    std::string underscored(spec.name);
    std::replace(underscored.begin(), underscored.end(), '-', '_');
    names += ",--" + underscored;
  }
  return names;
}

const OptionSpec* find_long(std::string_view name) {
  std::string dashed(name);
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  for (const auto& spec : kOptions) {
    if (spec.name == dashed) return &spec;
  }
  return nullptr;
}

const OptionSpec* find_short(char c) {
  for (const auto& spec : kOptions) {
    if (spec.short_name != 0 && spec.short_name == c) return &spec;
  }
  return nullptr;
}

std::string help_text() {
  static constexpr std::array<std::pair<Group, std::string_view>, 4> groups{{
      {Group::membership, "Membership and rendezvous"},
      {Group::workers, "Workers"},
      {Group::output, "Output"},
      {Group::program, "Program"},
  }};
  std::string text =
      "usage: ddprun [options] PROGRAM [ARGS...]\n"
      "Starts the workers of a distributed job on this node and watches them (a drop-in for torchrun).\n"
      "Defaults are in [brackets].\n";
  auto line = [&](std::string left, std::string_view help) {
    left.resize(std::max<std::size_t>(left.size() + 1, 38), ' ');
    text += left;
    text += help;
    text += '\n';
  };
  for (const auto& [group, title] : groups) {
    text += "\n" + std::string(title) + ":\n";
    for (const auto& spec : kOptions) {
      if (spec.group != group) continue;
      std::string left = spec.short_name != 0 ? std::string("  -") + spec.short_name + ", " : "      ";
      left += dash_name(spec);
      if (!is_flag(spec)) left += " " + std::string(spec.metavar);
      line(left, std::string(spec.help) + " [" + std::string(spec.fallback) + "]");
    }
  }
  text += "\nOther:\n";
  line("  -h, --help", "print this help and exit");
  line("      --version", "print the version and exit");
  text +=
      "\nPROGRAM is a .py script (run as python3 -u, or $PYTHON_EXEC), an executable file (run directly),\n"
      "or with -m a Python module. ARGS go to every worker verbatim; ${local_rank} in them becomes the\n"
      "worker's local rank. A prefix template prefixes every console line; without one, -t uses\n"
      "[${role_name}${local_rank}]:. Options with '-' may also be spelled with '_' (--nproc_per_node).\n"
      "Each option can also be set by PET_<NAME> (PET_NPROC_PER_NODE, PET_NNODES, ...); the command\n"
      "line wins.\n"
      "Exit status: 0 success, 1 the job failed, 2 usage error, 128+N ended by signal N.\n";
  return text;
}

// ---------------------------------------------------------------------------------------------
// Raw values and their source.

/// A value as given, and how to name its source in a message: "--nnodes" or
/// "--nnodes (from PET_NNODES)".
struct Raw {
  std::string value;
  std::string label;
};

[[noreturn]] void reject(const Raw& raw, std::string_view why) {
  throw UsageError(raw.label + ": " + quote_for_message(raw.value) + " " + std::string(why));
}

/// The command-line results of CLI11 and the environment, looked up by option.
class Settings {
 public:
  explicit Settings(const Environ& env) : env_(env) {}

  void bind(const OptionSpec& spec, CLI::Option* option) { options_.emplace_back(&spec, option); }

  std::optional<Raw> get(std::string_view name) const {
    for (const auto& [spec, option] : options_) {
      if (spec->name != name) continue;
      if (option->count() > 0) return Raw{option->results().back(), dash_name(*spec)};
      std::string pet = pet_name(*spec);
      if (auto value = lookup(env_, pet); value && !value->empty()) {
        return Raw{*value, dash_name(*spec) + " (from " + pet + ")"};
      }
      return std::nullopt;
    }
    throw std::logic_error("ddprun: option table has no " + std::string(name));
  }

  /// A flag: given on the command line (CLI11 records "true", or the text after '='), or a
  /// PET_* boolean.
  bool flag(std::string_view name) const {
    auto raw = get(name);
    if (!raw) return false;
    std::string lower = raw->value;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "1" || lower == "true") return true;
    if (lower == "0" || lower == "false") return false;
    reject(*raw, "is not a boolean (1, 0, true or false)");
  }

 private:
  const Environ& env_;
  std::vector<std::pair<const OptionSpec*, CLI::Option*>> options_;
};

// ---------------------------------------------------------------------------------------------
// Value parsers.

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    auto at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

/// A whole decimal integer (an optional '-', digits, nothing else), or nothing.
std::optional<long long> to_integer(std::string_view s) {
  long long value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

/// A finite decimal number, or nothing.
std::optional<double> to_number(std::string_view s) {
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

int integer_in(const Raw& raw, long long low, long long high, std::string_view expected) {
  auto value = to_integer(raw.value);
  if (!value || *value < low || *value > high) reject(raw, expected);
  return static_cast<int>(*value);
}

constexpr long long kIntMax = 2147483647;

std::pair<int, int> parse_nnodes(const Raw& raw) {
  static constexpr std::string_view expected = "is not N or MIN:MAX with 0 < MIN <= MAX";
  auto parts = split(raw.value, ':');
  if (parts.size() > 2) reject(raw, expected);
  auto low = to_integer(parts.front());
  auto high = to_integer(parts.back());
  if (!low || !high || *low <= 0 || *low > *high || *high > kIntMax) reject(raw, expected);
  return {static_cast<int>(*low), static_cast<int>(*high)};
}

/// gpu: visible devices (divided among workers of --devices-per-worker each); cpu: usable CPUs;
/// auto: gpu when any device is visible, else cpu.
int parse_nproc(const Raw& raw, const HostFacts& host, int devices_per_worker) {
  std::string_view v = raw.value;
  if (v == "auto") v = host.device_count > 0 ? "gpu" : "cpu";
  if (v == "cpu") return std::max(host.cpu_count, 1);
  if (v == "gpu") {
    if (host.device_count <= 0) {
      reject(raw, "asks for one worker per GPU, but no CUDA devices are visible (CUDA_VISIBLE_DEVICES, "
                  "/proc/driver/nvidia/gpus)");
    }
    int workers = host.device_count / std::max(devices_per_worker, 1);
    if (workers == 0) {
      reject(raw, "gives no worker: " + std::to_string(host.device_count) + " CUDA devices visible, " +
                      std::to_string(devices_per_worker) + " per worker (--devices-per-worker)");
    }
    return workers;
  }
  return integer_in(raw, 1, kIntMax, "is not a positive integer, gpu, cpu or auto");
}

StreamSelection parse_streams(const Raw& raw) {
  static constexpr std::string_view expected =
      "is not 0-3 or LOCAL_RANK:0-3,... (0 none, 1 stdout, 2 stderr, 3 both)";
  auto digit = [&](std::string_view s) {
    if (s.size() != 1 || s[0] < '0' || s[0] > '3') reject(raw, expected);
    return static_cast<StdStreams>(s[0] - '0');
  };
  StreamSelection selection;
  if (raw.value.find(':') == std::string::npos) {
    selection.all = digit(raw.value);
    return selection;
  }
  for (auto item : split(raw.value, ',')) {
    auto colon = item.find(':');
    if (colon == std::string_view::npos) reject(raw, expected);
    auto rank = to_integer(item.substr(0, colon));
    if (!rank || *rank < 0 || *rank > kIntMax) reject(raw, expected);
    if (!selection.per_local_rank.emplace(static_cast<int>(*rank), digit(item.substr(colon + 1))).second) {
      reject(raw, "names local rank " + std::to_string(*rank) + " twice");
    }
  }
  return selection;
}

std::map<std::string, std::string> parse_rdzv_conf(const Raw& raw) {
  static const std::set<std::string, std::less<>> numeric_keys{
      "join_timeout",        "last_call_timeout", "close_timeout", "keep_alive_interval",
      "keep_alive_max_attempt", "heartbeat_timeout", "read_timeout",  "timeout"};
  std::map<std::string, std::string> conf;
  if (trim(raw.value).empty()) return conf;
  for (auto item : split(trim(raw.value), ',')) {
    auto eq = item.find('=');
    std::string key(trim(item.substr(0, eq)));
    if (key.empty()) reject(raw, "is not K=V,K=V (an entry has no key)");
    std::string value(eq == std::string_view::npos ? std::string_view{} : trim(item.substr(eq + 1)));
    if (value.empty()) reject(raw, "gives no value for " + key + " (write " + key + "=VALUE)");
    if (numeric_keys.contains(key)) {
      auto number = to_number(value);
      if (!number || *number < 0) reject(raw, "sets " + key + " to " + value + ", not a number >= 0");
    }
    if (key == "is_host") {
      std::string lower = value;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      static const std::set<std::string, std::less<>> bools{"1", "0", "true", "false", "t", "f",
                                                             "yes", "no", "y", "n"};
      if (!bools.contains(lower)) reject(raw, "sets is_host to " + value + ", not a boolean");
    }
    conf[key] = value;  // torchrun: the last of a repeated key wins
  }
  return conf;
}

std::vector<int> parse_signals(const Raw& raw) {
  std::vector<int> signals;
  for (auto item : split(raw.value, ',')) {
    item = trim(item);
    if (item.empty()) reject(raw, "has an empty entry (write names like SIGTERM,SIGINT)");
    auto signo = signal_from_name(item);
    if (!signo) reject(raw, "has " + quote_for_message(item) + ", which is not a signal name");
    if (*signo == SIGKILL || *signo == SIGSTOP) {
      reject(raw, "names " + signal_name(*signo) + ", which no process can handle");
    }
    if (std::find(signals.begin(), signals.end(), *signo) == signals.end()) signals.push_back(*signo);
  }
  return signals;
}

std::optional<std::set<int>> parse_rank_filter(const Raw& raw, int nproc) {
  if (trim(raw.value).empty()) return std::nullopt;
  std::set<int> ranks;
  for (auto item : split(raw.value, ',')) {
    auto rank = to_integer(trim(item));
    if (!rank || *rank < 0) reject(raw, "is not a comma list of local ranks (integers >= 0)");
    if (*rank >= nproc) {
      reject(raw, "names local rank " + std::to_string(*rank) + ", but there are " + std::to_string(nproc) +
                      " workers (0.." + std::to_string(nproc - 1) + ")");
    }
    ranks.insert(static_cast<int>(*rank));
  }
  return ranks;
}

void check_prefix_template(const Raw& raw) {
  static const std::set<std::string, std::less<>> known{"role_name", "rank", "local_rank", "hostname"};
  std::string_view t = raw.value;
  for (auto at = t.find("${"); at != std::string_view::npos; at = t.find("${", at)) {
    auto close = t.find('}', at);
    if (close == std::string_view::npos) reject(raw, "has \"${\" without a closing \"}\"");
    auto name = t.substr(at + 2, close - at - 2);
    if (!known.contains(name)) {
      reject(raw, "has the unknown placeholder ${" + std::string(name) +
                      "} (known: ${role_name} ${rank} ${local_rank} ${hostname})");
    }
    at = close + 1;
  }
}

void require_non_empty(const Raw& raw) {
  if (raw.value.empty()) throw UsageError(raw.label + ": empty value");
}

/// torchrun's uuid4 run id for --standalone.
std::string random_run_id() {
  std::random_device device;
  std::mt19937_64 engine((static_cast<std::uint64_t>(device()) << 32) ^ device());
  std::array<unsigned char, 16> bytes{};
  for (auto& b : bytes) b = static_cast<unsigned char>(engine());
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0F) | 0x40);  // version 4
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3F) | 0x80);  // RFC 4122 variant
  std::string id;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) id += '-';
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", bytes[i]);
    id += hex;
  }
  return id;
}

// ---------------------------------------------------------------------------------------------
// The command line itself.

bool looks_like_option(std::string_view arg) {
  return arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1])) && arg[1] != '.';
}

/// CLI11 reads `--opt=` as "the value is the next argument" and takes the next argument as a
/// value even when it is another option. argparse refuses both; so does ddprun: they are typos
/// that would otherwise swallow PROGRAM or a flag. `consumed` = the arguments before PROGRAM.
void check_option_values(const std::vector<std::string>& args, std::size_t consumed) {
  for (std::size_t i = 0; i < consumed; ++i) {
    std::string_view arg = args[i];
    if (arg == "--") return;
    const OptionSpec* spec = nullptr;
    if (arg.starts_with("--")) {
      auto eq = arg.find('=');
      spec = find_long(arg.substr(2, eq == std::string_view::npos ? arg.npos : eq - 2));
      if (spec == nullptr || is_flag(*spec)) continue;
      if (eq != std::string_view::npos) {
        if (eq + 1 == arg.size()) {
          throw UsageError(dash_name(*spec) + ": empty value after '=' (give a value, or leave the option out)");
        }
        continue;
      }
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

ProgramMode decide_mode(const Settings& settings, const std::string& program, const Environ& env) {
  bool module = settings.flag("module");
  bool no_python = settings.flag("no-python");
  bool run_path = settings.flag("run-path");
  if (module && no_python) throw UsageError("--no-python: cannot be used with -m/--module (a module needs python)");
  if (run_path && no_python) throw UsageError("--run-path: cannot be used with --no-python (it runs python)");
  if (run_path && module) throw UsageError("--run-path: cannot be used with -m/--module (it runs a file)");
  if (module) return ProgramMode::python_module;
  if (no_python) return ProgramMode::executable;
  if (run_path || program.ends_with(".py")) return ProgramMode::python_script;
  return find_program(program, env) ? ProgramMode::executable : ProgramMode::python_script;
}

void fill_membership(LaunchConfig& config, const Settings& settings) {
  if (auto raw = settings.get("nnodes")) std::tie(config.min_nodes, config.max_nodes) = parse_nnodes(*raw);
  if (auto raw = settings.get("master-addr")) {
    require_non_empty(*raw);
    config.master_addr = raw->value;
  }
  if (auto raw = settings.get("master-port")) {
    config.master_port = integer_in(*raw, 0, 65535, "is not a port number (0..65535)");
  }
  if (auto raw = settings.get("rdzv-conf")) config.rdzv_conf = parse_rdzv_conf(*raw);
  if (auto raw = settings.get("local-addr")) config.local_addr = raw->value;

  config.standalone = settings.flag("standalone");
  if (config.standalone) {
    // torchrun ignores the user's rendezvous values here; so does ddprun, unvalidated.
    if (config.max_nodes > 1) {
      auto raw = settings.get("nnodes");
      throw UsageError("--standalone: runs one node, but " + raw->label + " asks for " + raw->value);
    }
    config.rdzv_backend = "c10d";
    config.rdzv_endpoint = "localhost:0";
    config.rdzv_id = random_run_id();
  } else {
    if (auto raw = settings.get("rdzv-backend")) {
      if (raw->value != "static" && raw->value != "c10d") reject(*raw, "is not a rendezvous backend (static, c10d)");
      config.rdzv_backend = raw->value;
    }
    if (auto raw = settings.get("rdzv-endpoint")) {
      parse_endpoint(raw->value, 29400, raw->label);
      config.rdzv_endpoint = raw->value;
    }
    if (auto raw = settings.get("rdzv-id")) {
      require_non_empty(*raw);
      config.rdzv_id = raw->value;
    }
  }
  if (auto raw = settings.get("node-rank")) {
    config.node_rank = integer_in(*raw, 0, kIntMax, "is not a node rank (an integer >= 0)");
    if (config.node_rank >= config.max_nodes) {
      reject(*raw, "is not below the number of nodes, " + std::to_string(config.max_nodes) + " (--nnodes)");
    }
  }
}

void fill_workers(LaunchConfig& config, const Settings& settings, const HostFacts& host) {
  if (auto raw = settings.get("devices-per-worker")) {
    config.devices_per_worker = integer_in(*raw, 0, kIntMax, "is not a count (an integer >= 0)");
  }
  if (auto raw = settings.get("nproc-per-node")) {
    config.nproc_per_node = parse_nproc(*raw, host, config.devices_per_worker);
  }
  require_devices(config.devices_per_worker, config.nproc_per_node, host.device_count);
  if (auto raw = settings.get("role")) {
    require_non_empty(*raw);
    config.role = raw->value;
  }
  if (auto raw = settings.get("max-restarts")) {
    config.max_restarts = integer_in(*raw, 0, kIntMax, "is not a count (an integer >= 0)");
  }
  if (auto raw = settings.get("monitor-interval")) {
    auto seconds = to_number(raw->value);
    if (!seconds || *seconds <= 0) reject(*raw, "is not a number of seconds > 0");
    config.monitor_interval_s = *seconds;
  }
  if (auto raw = settings.get("shutdown-timeout")) {
    auto seconds = to_number(raw->value);
    if (!seconds || *seconds < 0) reject(*raw, "is not a number of seconds >= 0");
    config.shutdown_timeout_s = *seconds;
  }
  if (auto raw = settings.get("signals-to-handle")) {
    config.signals_to_handle = parse_signals(*raw);
  }
}

void fill_output(LaunchConfig& config, const Settings& settings) {
  if (auto raw = settings.get("log-dir")) config.log_dir = raw->value;
  if (auto raw = settings.get("redirects")) config.redirects = parse_streams(*raw);
  if (auto raw = settings.get("tee")) config.tee = parse_streams(*raw);
  if (auto raw = settings.get("local-ranks-filter")) {
    config.local_ranks_filter = parse_rank_filter(*raw, config.nproc_per_node);
  }
  if (auto raw = settings.get("log-line-prefix-template")) {
    check_prefix_template(*raw);
    config.log_line_prefix_template = raw->value;
  }
}

}  // namespace

std::string quote_for_message(std::string_view value) {
  std::string out = "\"";
  for (unsigned char c : value) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char hex[5];
          std::snprintf(hex, sizeof hex, "\\x%02x", c);
          out += hex;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

Endpoint parse_endpoint(std::string_view text, int default_port, std::string_view flag) {
  auto bad = [&](std::string_view why) {
    throw UsageError(std::string(flag) + ": " + quote_for_message(text) + " " + std::string(why));
  };
  auto host_ok = [](std::string_view host, std::string_view extra) {
    return !host.empty() && std::all_of(host.begin(), host.end(), [&](unsigned char c) {
      return std::isalnum(c) || c == '.' || c == '-' || c == '_' || extra.find(static_cast<char>(c)) != extra.npos;
    });
  };
  text = trim(text);
  if (text.empty()) return {"localhost", default_port};
  std::string_view host = text;
  std::optional<std::string_view> port;
  if (text.starts_with('[')) {
    auto close = text.find(']');
    if (close == std::string_view::npos) bad("has '[' without ']' (write [v6addr]:PORT)");
    host = text.substr(1, close - 1);
    auto after = text.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') bad("is not [v6addr]:PORT");
      port = after.substr(1);
    }
    if (!host_ok(host, ":%")) bad("is not [v6addr]:PORT");
  } else {
    auto colon = text.rfind(':');
    if (colon != std::string_view::npos) {
      if (text.find(':') != colon) bad("looks like an IPv6 address without brackets (write [v6addr]:PORT)");
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
    }
    if (!host_ok(host, "")) bad("is not HOST[:PORT]");
  }
  if (!port) return {std::string(host), default_port};
  auto number = to_integer(*port);
  if (!number || *number < 0 || *number > 65535) {
    bad("has a port that is not 0..65535");
  }
  return {std::string(host), static_cast<int>(*number)};
}

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
  facts.device_count = static_cast<int>(visible_devices(env).size());
  return facts;
}

LaunchConfig parse_command_line(const std::vector<std::string>& args, const Environ& env, const HostFacts& host) {
  CLI::App app{"ddprun", "ddprun"};
  app.prefix_command();  // the first positional argument is PROGRAM; it and all after it are left over
  app.set_help_flag("-h,--help");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // as argparse
  CLI::Option* version = app.add_flag("--version");
  Settings settings(env);
  for (const auto& spec : kOptions) {
    std::string names = cli11_names(spec);
    settings.bind(spec, is_flag(spec) ? app.add_flag(names) : app.add_option(names));
  }

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    throw InfoRequested{help_text()};
  } catch (const CLI::ParseError& e) {
    throw from_cli11(e);
  }
  if (version->count() > 0) throw InfoRequested{"ddprun " DDPRUN_VERSION "\n"};

  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && looks_like_option(rest.front()) && rest.front() != "--") {
    std::string line = quote_for_message(rest.front());
    throw UsageError(line.substr(1, line.size() - 2) + ": unknown option");
  }
  // With no unknown option, `rest` is a suffix of `args`: everything before it was options.
  check_option_values(args, args.size() - rest.size());
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());

  LaunchConfig config;
  fill_membership(config, settings);
  fill_workers(config, settings, host);
  fill_output(config, settings);
  if (rest.empty()) throw UsageError("PROGRAM: missing; usage: ddprun [options] PROGRAM [ARGS...]");
  config.program = rest.front();
  config.program_args.assign(rest.begin() + 1, rest.end());
  config.run_path = settings.flag("run-path");
  config.mode = decide_mode(settings, config.program, env);
  return config;
}

}  // namespace ddprun::launcher

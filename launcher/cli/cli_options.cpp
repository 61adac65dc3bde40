#include "launcher/cli/cli_options.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

namespace ddprun::launcher {
namespace {

constexpr std::array kOptions{
    OptionSpec{Option::nnodes, "nnodes", 0, "N|MIN:MAX", "1", Group::membership, "nodes in the job; MIN:MAX = elastic"},
    OptionSpec{Option::node_rank, "node-rank", 0, "R", "0", Group::membership, "this node's rank (static rendezvous)"},
    OptionSpec{Option::master_addr, "master-addr", 0, "HOST", "127.0.0.1", Group::membership, "static rendezvous: address of node 0"},
    OptionSpec{Option::master_port, "master-port", 0, "PORT", "29500", Group::membership, "static rendezvous: store port on node 0"},
    OptionSpec{Option::rdzv_backend, "rdzv-backend", 0, "NAME", "static", Group::membership, "static, c10d or etcd-v3"},
    OptionSpec{Option::rdzv_endpoint, "rdzv-endpoint", 0, "HOST[:PORT]", "none", Group::membership,
               "c10d store; IPv6 as [v6addr]:PORT (or v6addr:PORT, split at the last ':'); PORT defaults to 29400",
               true},
    OptionSpec{Option::rdzv_id, "rdzv-id", 0, "ID", "none", Group::membership, "job id (TORCHELASTIC_RUN_ID, log folder prefix)"},
    OptionSpec{Option::rdzv_conf, "rdzv-conf", 0, "K=V,...", "none", Group::membership,
               "join_timeout=600,last_call_timeout=30,is_host=1,...", true},
    OptionSpec{Option::standalone, "standalone", 0, "", "off", Group::membership,
               "one node: c10d on localhost, a free port, a random id"},
    OptionSpec{Option::local_addr, "local-addr", 0, "HOST", "hostname", Group::membership, "this node's address as other nodes see it", true},
    OptionSpec{Option::nproc_per_node, "nproc-per-node", 0, "N|gpu|cpu|auto", "1", Group::workers,
               "workers on this node; gpu/auto count CUDA devices"},
    OptionSpec{Option::devices_per_worker, "devices-per-worker", 0, "K", "0", Group::workers,
               "CUDA devices per worker; 0 = all inherit CUDA_VISIBLE_DEVICES"},
    OptionSpec{Option::role, "role", 0, "NAME", "default", Group::workers, "worker role (ROLE_NAME)", true},
    OptionSpec{Option::max_restarts, "max-restarts", 0, "N", "0", Group::workers, "worker-group restarts before the job fails"},
    OptionSpec{Option::monitor_interval, "monitor-interval", 0, "SECONDS", "0.1", Group::workers,
               "accepted for torchrun; ddprun reacts to exits at once"},
    OptionSpec{Option::shutdown_timeout, "shutdown-timeout", 0, "SECONDS", "30", Group::workers, "grace between the signal and SIGKILL"},
    OptionSpec{Option::signals_to_handle, "signals-to-handle", 0, "SIG,...", "SIGTERM,SIGINT,SIGHUP,SIGQUIT", Group::workers,
               "signals that stop the job"},
    OptionSpec{Option::forward_signals, "forward-signals", 0, "SIG,...|none", "SIGUSR1,SIGUSR2", Group::workers,
               "signals passed on to the workers (not when the sender already signals them)"},
    OptionSpec{Option::start_method, "start-method", 0, "fork|spawn|forkserver", "spawn", Group::workers,
               "accepted for torchrun; ddprun always forks and execs"},
    OptionSpec{Option::numa_binding, "numa-binding", 0, "node|socket|exclusive|core-complex", "none", Group::workers,
               "bind each worker to the CPUs near its GPU (the GPU's NUMA node, its socket, a share of the node, an L3 cache)"},
    OptionSpec{Option::virtual_local_rank, "virtual-local-rank", 0, "", "off", Group::workers,
               "each worker sees only its own GPU (CUDA_VISIBLE_DEVICES) and gets LOCAL_RANK=0"},
    OptionSpec{Option::event_log_handler, "event-log-handler", 0, "NAME", "null", Group::workers,
               "torchrun's Python event handler: no effect under ddprun (its events: --events)"},
    OptionSpec{Option::worker_store, "worker-store", 0, "agent|fresh", "agent", Group::membership,
               "multi-node workers' store: node 0's agent on --master-port, or a fresh port per round"},
    OptionSpec{Option::log_dir, "log-dir", 0, "DIR", "a temp dir", Group::output, "base folder of the per-worker logs", true},
    OptionSpec{Option::redirects, "redirects", 'r', "0-3|LR:0-3,...", "0", Group::output,
               "to log files only: 1 stdout, 2 stderr, 3 both; LR = local rank"},
    OptionSpec{Option::tee, "tee", 't', "0-3|LR:0-3,...", "0", Group::output, "as -r, and to the console with a prefix"},
    OptionSpec{Option::local_ranks_filter, "local-ranks-filter", 0, "LR,...", "all", Group::output,
               "local ranks whose output reaches the console", true},
    OptionSpec{Option::duplicate_stdout_filters, "duplicate-stdout-filters", 0, "TEXT,...", "none", Group::output,
               "copy the teed stdout lines that contain any TEXT to <attempt folder>/filtered_stdout.log", true},
    OptionSpec{Option::duplicate_stderr_filters, "duplicate-stderr-filters", 0, "TEXT,...", "none", Group::output,
               "as --duplicate-stdout-filters, for stderr (filtered_stderr.log)", true},
    OptionSpec{Option::logs_specs, "logs-specs", 0, "NAME", "default", Group::output,
               "torchrun's Python log-file plugin: no effect under ddprun (its log files: --log-dir, -r, -t)"},
    OptionSpec{Option::log_line_prefix_template, "log-line-prefix-template", 0, "T", "none", Group::output,
               "console line prefix with ${role_name} ${rank} ${local_rank} ${hostname}", true},
    OptionSpec{Option::pty, "pty", 0, "auto|on|off", "auto", Group::output,
               "a pseudo-terminal per worker (live output, progress bars); auto = when stdout is a terminal"},
    OptionSpec{Option::stdin_target, "stdin", 0, "none|rank0|all", "rank0", Group::output,
               "workers that read ddprun's stdin; the others get /dev/null"},
    OptionSpec{Option::verbose, "verbose", 'v', "", "off", Group::output,
               "say what the launcher does (config, rendezvous, each start); also LOGLEVEL=INFO"},
    OptionSpec{Option::events, "events", 0, "FILE", "none", Group::output,
               "append the job's events to FILE as JSON Lines (ddprun trace FILE: a timeline)"},
    OptionSpec{Option::module, "module", 'm', "", "off", Group::program, "run python -u -m PROGRAM (PROGRAM is a module)"},
    OptionSpec{Option::no_python, "no-python", 0, "", "off", Group::program, "exec PROGRAM directly, not through python"},
    OptionSpec{Option::run_path, "run-path", 0, "", "off", Group::program, "accepted for torchrun; runs PROGRAM with python"},
    OptionSpec{Option::use_env, "use-env", 0, "", "off", Group::program,
               "accepted for torch.distributed.launch; the environment is always set"},
    OptionSpec{Option::append_local_rank, "append-local-rank", 0, "off|dash|underscore", "off", Group::program,
               "pass --local-rank=N (dash) or --local_rank=N (underscore) before ARGS, as torch.distributed.launch"},
    OptionSpec{Option::preload, "preload", 0, "MODULE,...", "none", Group::program,
               "keep a Python interpreter per local rank that has imported MODULEs, to start or restart each worker warm"},
    OptionSpec{Option::status, "status", 0, "auto|on|off", "auto", Group::output,
               "live status block (per rank: state, step, samples/s, CPU, RSS) below the output; auto = on a terminal"},
    OptionSpec{Option::status_interval, "status-interval", 0, "SECONDS", "0", Group::output,
               "print a one-line status summary every SECONDS (for logs; 0 = never)"},
    OptionSpec{Option::hang_timeout, "hang-timeout", 0, "SECONDS", "0", Group::workers,
               "a hang: no rank made progress (report, output line, CPU) for SECONDS; print every rank's stacks (0 = off)"},
    OptionSpec{Option::hang_action, "hang-action", 0, "report|stop|restart", "report", Group::workers,
               "after a hang's stacks: go on, stop the job (exit 1), or restart the workers (--max-restarts)"},
    OptionSpec{Option::gpu_health, "gpu-health", 0, "on|off", "on", Group::workers,
               "before each start, a visible GPU that is lost, needs a reset or has uncorrectable memory errors fails it (elastic: the node leaves)"},
    OptionSpec{Option::gpu_release_timeout, "gpu-release-timeout", 0, "SECONDS", "30", Group::workers,
               "a restart waits until the stopped workers hold no GPU memory, at most SECONDS (0 = no wait)"},
    OptionSpec{Option::status_port, "status-port", 0, "PORT", "none", Group::output,
               "serve the status page, /api/status, /api/stacks and /metrics on PORT (0 = pick one and print it)"},
    OptionSpec{Option::status_host, "status-host", 0, "ADDR", "127.0.0.1", Group::output,
               "the address --status-port binds; beyond loopback it requires the store token (DDPRUN_STORE_TOKEN)"},
    OptionSpec{Option::hostfile, "hostfile", 0, "FILE", "none", Group::hosts,
               "start one agent per host of FILE (lines: HOST [slots=N]) over ssh; node 0 = the first"},
    OptionSpec{Option::hosts, "hosts", 'H', "HOST[:SLOTS],...", "none", Group::hosts, "as --hostfile, the hosts on the command line"},
    OptionSpec{Option::include, "include", 0, "HOST,...", "all", Group::hosts, "only these hosts of the list"},
    OptionSpec{Option::exclude, "exclude", 0, "HOST,...", "none", Group::hosts, "every host of the list but these"},
    OptionSpec{Option::ssh_port, "ssh-port", 0, "PORT", "ssh's", Group::hosts, "the port ssh connects to"},
    OptionSpec{Option::ssh_option, "ssh-option", 0, "KEY=VALUE", "none", Group::hosts,
               "passed to ssh as -o KEY=VALUE; may be repeated"},
    OptionSpec{Option::env_export, "env-export", 0, "NAME,...", "PATH,PYTHONPATH,VIRTUAL_ENV", Group::hosts,
               "variables set on every host as here (added to the default ones)"},
};

constexpr bool in_handle_order() {
  if (kOptions.size() != static_cast<std::size_t>(Option::count_)) return false;
  for (std::size_t i = 0; i < kOptions.size(); ++i) {
    if (static_cast<std::size_t>(kOptions[i].id) != i) return false;
  }
  return true;
}
static_assert(in_handle_order(), "kOptions must list every Option once, in the enum's order");

}  // namespace

std::span<const OptionSpec> option_table() { return kOptions; }

const OptionSpec& spec_of(Option option) { return kOptions[static_cast<std::size_t>(option)]; }

bool is_flag(const OptionSpec& spec) { return spec.metavar.empty(); }

std::string dash_name(const OptionSpec& spec) { return "--" + std::string(spec.name); }

std::string pet_name(const OptionSpec& spec) {
  std::string pet = "PET_";
  for (char c : spec.name) pet += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return pet;
}

std::string underscored_name(const OptionSpec& spec) {
  std::string underscored(spec.name);
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  return underscored;
}

bool looks_like_option(std::string_view arg) {
  return arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1])) && arg[1] != '.';
}

std::string cli11_names(const OptionSpec& spec) {
  std::string names;
  if (spec.short_name != 0) names = std::string("-") + spec.short_name + ",";
  names += dash_name(spec);
  if (spec.name.find('-') != std::string_view::npos) names += ",--" + underscored_name(spec);
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
  static constexpr std::array<std::pair<Group, std::string_view>, 5> groups{{
      {Group::membership, "Membership and rendezvous"},
      {Group::workers, "Workers"},
      {Group::output, "Output"},
      {Group::program, "Program"},
      {Group::hosts, "Hosts over ssh (the launching machine starts every node's agent)"},
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
    text.append("\n").append(title).append(":\n");
    for (const auto& spec : kOptions) {
      if (spec.group != group) continue;
      std::string left = spec.short_name != 0 ? std::string("  -") + spec.short_name + ", " : "      ";
      left += dash_name(spec);
      if (!is_flag(spec)) left.append(" ").append(spec.metavar);
      line(left, std::string(spec.help) + " [" + std::string(spec.fallback) + "]");
    }
  }
  text += "\nOther:\n";
  line("  -h, --help", "print this help and exit");
  line("      --version", "print the version and exit");
  text += "\nA running job, from another terminal (JOB: run id, agent pid, log dir or HOST:PORT):\n";
  line("  ddprun status [--json] [JOB]", "its status, a line per rank");
  line("  ddprun stacks [--json] [JOB]", "every rank's stacks, now, grouped by where they stand");
  text +=
      "\nPROGRAM is a .py script (run as PYTHON -u), an executable file (run directly; one whose #! line\n"
      "names Python runs as that python -u), or with -m a Python module. PYTHON: $PYTHON_EXEC, else\n"
      "the python3 beside ddprun (in the env it is installed in), else $VIRTUAL_ENV/bin/python, else\n"
      "$CONDA_PREFIX/bin/python, else python3 on PATH (-v says which).\n"
      "ARGS go to every worker as given, but $local_rank and ${local_rank} become the worker's local\n"
      "rank and $$ becomes $ (as torchrun). A prefix template prefixes every console line; without one,\n"
      "-t uses [${role_name}${local_rank}]:. Options with '-' may also be spelled with '_'\n"
      "(--nproc_per_node), and shortened to any unique prefix (--nproc=2). --OPT= (an empty value)\n"
      "means the default where torchrun reads it so. Each option can also be set by PET_<NAME>\n"
      "(PET_NPROC_PER_NODE, PET_NNODES, ...); the command line wins.\n"
      "Exit status: 0 success, 1 the job failed, 2 usage error, 128+N ended by signal N.\n";
  return text;
}

}  // namespace ddprun::launcher

#pragma once
/// LaunchConfig: the user's flags (command line > PET_* environment > default), validated and
/// resolved into typed values, as one value. Everything downstream reads this and nothing else of
/// argv, and nothing downstream refuses it: every usage error is raised while it is made.
#include <csignal>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/fleet/fleet_config.hpp"
#include "launcher/observe/hang_action.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/etcd/etcd_options.hpp"
#include "rendezvous/rdzv_backend.hpp"
#include "rendezvous/rendezvous_settings.hpp"

namespace ddprun::launcher {

/// Which of a worker's standard streams a `-r`/`-t` setting covers (torchrun's Std).
enum class StdStreams : unsigned { none = 0, out = 1, err = 2, both = 3 };

inline bool covers_stdout(StdStreams s) { return (static_cast<unsigned>(s) & 1U) != 0; }
inline bool covers_stderr(StdStreams s) { return (static_cast<unsigned>(s) & 2U) != 0; }

/// `-r 3` (one value for every local rank) or `-r 0:1,1:2` (per local rank; ranks not listed: none).
struct StreamSelection {
  StdStreams all = StdStreams::none;
  std::map<int, StdStreams> per_local_rank;  ///< when non-empty, `all` is ignored
  StdStreams for_local_rank(int local_rank) const {
    if (per_local_rank.empty()) return all;
    auto it = per_local_rank.find(local_rank);
    return it == per_local_rank.end() ? StdStreams::none : it->second;
  }
};

/// How PROGRAM is started; decided from the flags and the program's name.
enum class ProgramMode {
  python_script,  ///< `PYTHON -u PROGRAM ARGS` (a `.py` file, or anything without --no-python that is not executable)
  python_module,  ///< `PYTHON -u -m PROGRAM ARGS` (`-m`)
  executable,     ///< exec PROGRAM ARGS directly (`--no-python`, or an executable file that is not `.py`)
};

/// `--pty`: whether each worker gets a pseudo-terminal. auto = when ddprun's stdout is a terminal.
enum class PtyMode { automatic, on, off };

/// `--status`: the live status block at the bottom of the terminal. auto = when ddprun's stdout is a terminal.
enum class StatusMode { automatic, on, off };

/// `--stdin`: which workers read ddprun's stdin; the others get /dev/null.
enum class StdinTarget { none, rank0, all };

/// `--append-local-rank`: torch.distributed.launch appended `--local_rank=N` (1.x) or
/// `--local-rank=N` (2.x) to each worker's arguments; legacy scripts parse it.
enum class LocalRankArg { off, dash, underscore };

/// `--worker-store`: where workers of a multi-node job find their store (MASTER_ADDR:MASTER_PORT).
/// agent = node 0's agent store on --master-port with a per-attempt key prefix, as torchrun;
/// fresh = a fresh store on a fresh port each round (ddprun before; needs any port open between nodes).
enum class WorkerStore { agent, fresh };

/// `--numa-binding` (torchrun's AffinityMode): which CPUs near its GPU each worker is bound to.
/// node: every CPU of the GPU's NUMA node; socket: every CPU of the NUMA nodes of the GPU's socket;
/// exclusive: the node's physical cores divided among the node's GPUs; core_complex: one group of
/// cores that share the last-level cache (L3) on the node, a different one per GPU where possible.
enum class NumaMode { node, socket, exclusive, core_complex };

/// "node", "socket", "exclusive" or "core-complex": the mode as the flag spells it.
std::string_view numa_mode_name(NumaMode mode);

/// `--rdzv-backend`: the rendezvous layer's enum (rendezvous/rdzv_backend.hpp), the one definition.
using rendezvous::RdzvBackend;
using rendezvous::backend_name;

/// `--rdzv-conf`, read once (parse_rdzv_conf). The rendezvous' own keys are typed in
/// LaunchConfig::rendezvous, etcd's here; neither is read from `given` again.
struct RdzvConf {
  /// Every entry as given, the last of a repeated key: what -v prints as rdzv_configs (torchrun
  /// prints its dict), keys ddprun does not know included.
  std::map<std::string, std::string> given;
  /// The etcd keys, which parse_etcd_options turns into LaunchConfig::etcd for an etcd-v3 rendezvous.
  rendezvous::EtcdConf etcd;
};

/// The port of --rdzv-endpoint when it names none (torchrun's default for c10d).
inline constexpr int kDefaultRdzvPort = 29400;

/// Where this node stands in the job.
struct Topology {
  int min_nodes = 1;
  int max_nodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;  ///< resolved: `gpu`/`cpu`/`auto` already turned into a count
  /// Rendezvous rounds (several nodes, or c10d) rather than one node with a store of its own.
  /// --standalone is c10d on a store of its own: one node, not multi-node.
  bool multi_node = false;
};

struct LaunchConfig {
  // Membership.
  Topology topology;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  RdzvBackend rdzv_backend = RdzvBackend::static_;
  /// --rdzv-endpoint, parsed (the port kDefaultRdzvPort when it names none); nothing when unset.
  /// --standalone: localhost:0.
  std::optional<rendezvous::Endpoint> rdzv_endpoint;
  /// Multi-node: where the job's rendezvous store listens, node 0's (static: --master-addr and
  /// --master-port) or the endpoint's (c10d).
  rendezvous::Endpoint store_endpoint{"127.0.0.1", 29500};
  std::string rdzv_id = "none";
  RdzvConf rdzv_conf;
  /// etcd-v3: the members (--rdzv-endpoint) and --rdzv-conf's etcd keys; store_endpoint is the first.
  std::optional<rendezvous::EtcdOptions> etcd;
  /// Every rule of the rendezvous (--rdzv-conf's keys, run id, node counts, ...), resolved.
  rendezvous::RendezvousSettings rendezvous;
  bool standalone = false;
  std::string local_addr;  ///< empty = decide later
  /// DDPRUN_STORE_TOKEN or DDPRUN_STORE_TOKEN_FILE's content: the token every store of the job
  /// (the agent's, the workers') requires; nothing = no authentication.
  std::optional<std::string> store_token;

  // Supervision.
  int max_restarts = 0;
  double monitor_interval_s = 0.1;  ///< accepted for compatibility; ddprun is event driven
  double shutdown_timeout_s = 30.0;
  /// `--gpu-health`: check the node's visible GPUs through NVML before each attempt (lost, reset
  /// required, retired pages pending, uncorrectable ECC errors, rows to remap).
  bool gpu_health = true;
  /// `--gpu-release-timeout`: a restart waits at most so long for the stopped workers' processes to
  /// hold no GPU memory; 0 = no wait.
  double gpu_release_timeout_s = 30;
  double hang_timeout_s = 0;  ///< `--hang-timeout`: no progress for so long is a hang; 0 = never
  HangAction hang_action = HangAction::report;  ///< `--hang-action`
  std::vector<int> signals_to_handle = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  std::string role = "default";
  std::string start_method = "spawn";  ///< accepted for torchrun (fork|spawn|forkserver); ddprun always forks and execs
  std::vector<int> signals_to_forward = {SIGUSR1, SIGUSR2};  ///< `--forward-signals`; empty = none
  WorkerStore worker_store = WorkerStore::agent;

  /// `--numa-binding`: nothing = workers run on every CPU ddprun may use.
  std::optional<NumaMode> numa_binding;
  /// `--virtual-local-rank`: LOCAL_RANK=0 for every worker, whose `devices` entry is its own GPU(s).
  bool virtual_local_rank = false;
  /// Lines to print once when the job starts: options torchrun accepts that do nothing here
  /// (--event-log-handler, --logs-specs with a value other than the default), and why.
  std::vector<std::string> notices;

  // Devices: 0 = inherit CUDA_VISIBLE_DEVICES unchanged; k > 0 = k devices per worker.
  int devices_per_worker = 0;
  /// CUDA_VISIBLE_DEVICES per local rank (nproc_per_node entries); nothing = inherited unchanged.
  std::vector<std::optional<std::string>> devices = {std::nullopt};
  /// Where the GPU count came from (VisibleDevices::source), when the command line needed one.
  std::optional<std::string> device_source;

  // Output.
  std::string log_dir;  ///< empty = a fresh temporary folder
  StreamSelection redirects;
  StreamSelection tee;
  std::optional<std::set<int>> local_ranks_filter;  ///< nothing = every local rank
  std::string log_line_prefix_template;             ///< empty = `[${role_name}${local_rank}]:` on tee
  /// `--duplicate-stdout-filters` / `--duplicate-stderr-filters`: the teed lines that contain any of
  /// these texts are also copied to the attempt's filtered_stdout.log / filtered_stderr.log; empty = no file.
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  PtyMode pty = PtyMode::automatic;
  StdinTarget stdin_target = StdinTarget::rank0;
  StatusMode status = StatusMode::automatic;
  double status_interval_s = 0;  ///< `--status-interval`: a status line every so many seconds; 0 = none
  bool verbose = false;  ///< `-v` or LOGLEVEL=INFO/DEBUG: print the config, the rendezvous, each start
  std::string events_file;  ///< `--events FILE`: the job's events as JSON Lines; empty = none
  /// `--status-port`: the status endpoint on TCP (0 = a port the kernel picks); nothing = only
  /// the owner-only Unix socket that `ddprun status` reads.
  std::optional<int> status_port;
  std::string status_host = "127.0.0.1";  ///< `--status-host`: beyond loopback, store_token is required

  // Program.
  ProgramMode mode = ProgramMode::python_script;
  /// `--preload`: the modules each local rank's warm interpreter imports ahead of its worker; empty: none.
  std::vector<std::string> preload;
  bool no_python = false;  ///< `--no-python`: PROGRAM is exec'd as it is, its #! line never read
  bool use_env = false;  ///< torch.distributed.launch's --use-env: accepted; the environment is always set
  LocalRankArg append_local_rank = LocalRankArg::off;
  std::string program;                    ///< as given on the command line
  std::vector<std::string> program_args;  ///< passed verbatim (after `${local_rank}` substitution)

  /// --hostfile / -H: this ddprun starts every host's agent over ssh (fleet.hpp); no hosts = not.
  FleetConfig fleet;
};

inline std::string_view numa_mode_name(NumaMode mode) {
  switch (mode) {
    case NumaMode::node: return "node";
    case NumaMode::socket: return "socket";
    case NumaMode::exclusive: return "exclusive";
    case NumaMode::core_complex: return "core-complex";
  }
  return "node";
}

}  // namespace ddprun::launcher

#pragma once
/// What a running job is doing, as values: one rank's sample, one node's, the whole job's. The
/// agent's status monitor fills them about once a second (from /proc and the progress channel);
/// the console's status block, the status endpoint (/api/status, /metrics), `ddprun status`, the
/// hang and straggler rules and the multi-node status keys all read these and nothing else.
/// No I/O here; status_json.hpp turns them into JSON and back.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::launcher {

enum class RankState {
  starting,  ///< spawned, no sample yet
  running,
  exited,    ///< exited 0
  failed,    ///< exited non-zero or by a signal
  stopped,   ///< stopped by ddprun (a restart, a signal, another rank's failure)
};

/// "running", "failed", ...: the word the console, JSON and metrics use.
const char* rank_state_name(RankState state);
/// The inverse of rank_state_name; nullopt for an unknown word.
std::optional<RankState> parse_rank_state(const std::string& name);

/// What the worker last published on its progress channel (DDPRUN_PROGRESS_FILE).
struct ProgressSample {
  std::int64_t step = 0;
  std::int64_t samples = 0;
  std::string text;             ///< at most 256 bytes, UTF-8
  double age_seconds = 0;       ///< since the worker last changed it
  double steps_per_second = 0;  ///< over the monitor's rate window (0 until two samples)
  double samples_per_second = 0;
};

/// One GPU a worker sees (its CUDA_VISIBLE_DEVICES, in its own order: gpus[0] is its cuda:0), as
/// NVML reported it at the node's last GPU sample (gpu/gpu_state.hpp). A value NVML did not give
/// (NOT_SUPPORTED on a GeForce board, NO_PERMISSION, a lost GPU) is nothing, never 0.
struct RankGpu {
  unsigned int index = 0;  ///< NVML's index (nvidia-smi's), not CUDA's
  std::string uuid;        ///< "GPU-8932f937-..."; empty when NVML did not say
  std::string bus_id;      ///< "00000000:3B:00.0"; empty when NVML did not say
  std::optional<unsigned int> utilisation_percent;  ///< of time a kernel ran, the driver's last period
  std::optional<std::uint64_t> memory_used_bytes;   ///< by every process on the GPU
  std::optional<std::uint64_t> memory_total_bytes;
  /// Held by this worker's processes (its process tree) on this GPU; nothing when the driver cannot
  /// list the GPU's processes, or lists one of the worker's without its amount.
  std::optional<std::uint64_t> own_memory_bytes;
  std::optional<unsigned int> temperature_c;
  std::optional<double> power_watts;
  std::vector<std::string> throttle;  ///< the active clock throttle reasons a user can act on, by name
  std::optional<std::uint64_t> uncorrectable_ecc_errors;  ///< volatile: since the driver loaded
  std::uint64_t xid_count = 0;             ///< Xid critical errors seen since ddprun started watching
  std::vector<unsigned long long> xids;    ///< the last of them (at most 8), oldest first
  std::string problem;                     ///< why no worker should start on it (health); empty: none
};

struct RankStatus {
  int rank = 0;        ///< global rank
  int local_rank = 0;
  pid_t pid = 0;
  RankState state = RankState::starting;
  int exitcode = 0;              ///< exited/failed: torchrun's convention (-N: signal N)
  double cpu_percent = 0;        ///< of one core, the worker's whole process tree, since the last sample
  double cpu_seconds = 0;        ///< user + system, the whole process tree, since it started
  std::uint64_t rss_bytes = 0;   ///< the whole process tree
  double output_age_seconds = -1;  ///< since its last output line; -1: none yet
  std::optional<ProgressSample> progress;  ///< none: the worker never reported
  bool straggler = false;        ///< step rate persistently below the others' (straggler rule)
  std::vector<RankGpu> gpus;     ///< the GPUs it sees; empty without NVML (or when it sees none)
  /// Its GPUs' utilisation persistently far below the other ranks' while they work (straggler rule).
  bool gpu_straggler = false;
};

/// --preload: an interpreter waiting to become a worker of the node's next start.
struct WarmInterpreter {
  int local_rank = 0;
  pid_t pid = 0;
  bool ready = false;  ///< its modules are imported; else still importing
};

struct NodeStatus {
  int node_rank = 0;
  std::string host;
  int attempt = 0;          ///< the log folder's attempt_<n>
  int restarts = 0;         ///< restarts so far (TORCHELASTIC_RESTART_COUNT)
  int hangs = 0;            ///< hangs detected so far on this node
  double sampled_at = 0;    ///< unix time of the sample, seconds
  std::vector<RankStatus> ranks;  ///< this node's workers, by local rank
  std::vector<WarmInterpreter> warm;  ///< --preload's waiting interpreters, by local rank (not workers yet)
  /// Why the ranks' GPU fields are missing or old: "NVML stalled: nvmlDeviceGetUtilizationRates has
  /// not returned for 2.0 s". Empty when they are fresh, and on a node without NVML (no GPU fields).
  std::string gpu_note;
};

struct JobStatus {
  std::string run_id;
  int world_size = 0;
  std::vector<NodeStatus> nodes;  ///< by node rank; a multi-node job's other nodes from the store
};

/// One rank's stacks as captured (stack_capture): native frames of every thread, and Python frames
/// where the worker runs Python.
struct StackFrame {
  std::string function;  ///< "all_reduce", "time.sleep", "??" when unknown
  std::string location;  ///< "train.py:57", "libgloo.so", or empty
};
struct ThreadStack {
  std::string name;                 ///< "Thread 1 (LWP 1234)" or the Python thread's id
  bool python = false;              ///< Python frames (innermost first) rather than native ones
  std::vector<StackFrame> frames;   ///< innermost first
};
struct RankStacks {
  int rank = 0;
  int node_rank = 0;
  pid_t pid = 0;
  std::string error;                ///< why nothing could be captured (empty: captured)
  std::string file;                 ///< where the full text was written
  std::vector<ThreadStack> threads;
};

}  // namespace ddprun::launcher

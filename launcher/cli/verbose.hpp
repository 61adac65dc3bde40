#pragma once
/// The lines `-v` (or LOGLEVEL=INFO/DEBUG/NOTSET) adds to ddprun's stderr, as torchrun logs its
/// launch config with LOGLEVEL=INFO: pure formatting, so each line is tested by table. The agent
/// prints them (print_line adds "ddprun: ").
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/launch_config.hpp"

namespace ddprun::launcher {

/// What the launch config lines say beyond LaunchConfig: what was decided from it.
struct LaunchFacts {
  std::string executable;                 ///< the path the workers are exec'd from
  std::vector<std::string> argv;          ///< as each worker gets it, `${local_rank}` not yet expanded
  std::optional<std::string> interpreter; ///< describe_python of the workers' Python; nothing: exec'd as is
  std::optional<std::string> device_source;  ///< where the GPU count came from, when one was needed
  std::string master;                     ///< MASTER_ADDR:MASTER_PORT of the workers; empty: decided per round
  std::string log_dir;                    ///< this run's log folder
};

/// "launch config:" then one "  key : value" line per setting, keys aligned as torchrun's:
/// entrypoint, command, interpreter (Python workers only), nnodes, nproc_per_node, gpus (when
/// counted), node_rank, run_id, rdzv_backend, rdzv_endpoint, rdzv_configs, max_restarts, master,
/// log_dir, forward_signals.
std::vector<std::string> describe_launch_config(const LaunchConfig& config, const LaunchFacts& facts);

/// "attempt 0: starting 4 workers" or "attempt 2: starting 4 workers (restart 2 of 3)".
std::string describe_attempt_start(int attempt, int restart_count, int max_restarts, int workers);

/// "started local rank 1 (rank 5), pid 4242: /usr/bin/python3 -u train.py --lr 0.1".
std::string describe_worker_start(int local_rank, int rank, pid_t pid, const std::vector<std::string>& argv);

/// argv as one line a shell would split back into the same words: words with spaces, quotes or
/// other special characters in single quotes, control characters escaped.
std::string quote_command(const std::vector<std::string>& argv);

}  // namespace ddprun::launcher

#pragma once
/// WorkerSpec: everything that makes one worker of one attempt what it is. The agent fills it in
/// from the config and the rendezvous; the worker group turns it into an environment and a process.
#include <optional>
#include <string>
#include <vector>

namespace ddprun::launcher {

/// How a worker's stdout and stderr reach ddprun.
enum class WorkerTerminal {
  pipes,        ///< pipes (ddprun's stdout is not a terminal, or --pty off)
  pty_or_pipes, ///< a pty per stream; pipes when none can be opened (--pty auto)
  pty,          ///< a pty per stream, or the worker does not start (--pty on)
};

struct WorkerSpec {
  int local_rank = 0;
  int rank = 0;
  int local_world_size = 1;
  int world_size = 1;
  int group_rank = 0;
  int group_world_size = 1;
  std::string role = "default";
  int role_rank = 0;
  int role_world_size = 1;
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id;
  bool use_agent_store = false;
  /// TORCHELASTIC_SIGNALS_TO_HANDLE: --signals-to-handle as torchrun 2.x passes it on (signals_to_handle_value).
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  /// Also NCCL_ASYNC_ERROR_HANDLING=1 (PyTorch 1.x's name): the executable links LibTorch 1.x
  /// (links_libtorch_1). A Python worker's torch is judged by ddprun's sitecustomize instead.
  bool libtorch_1 = false;
  std::string error_file;
  std::string progress_file;  ///< DDPRUN_PROGRESS_FILE: where ddprun::progress::report writes
  /// Put first on PYTHONPATH: ddprun's Python modules (python/: sitecustomize, ddprun_progress); empty: none.
  std::string python_dir;
  std::string python_stacks_file;  ///< DDPRUN_PYTHON_STACKS_FILE: where its faulthandler writes (sitecustomize)
  int stacks_signal = 0;           ///< DDPRUN_STACKS_SIGNAL: the signal it registers for; 0: none
  std::optional<std::string> cuda_visible_devices;  ///< nothing = inherit the launcher's
  bool virtual_local_rank = false;  ///< `--virtual-local-rank`: LOCAL_RANK=0 (its own GPUs are its only ones)
  /// `--numa-binding`: the CPUs the worker is bound to (sched_setaffinity before exec); empty = not bound.
  std::vector<int> cpu_affinity;
  std::string executable;                           ///< absolute path
  std::vector<std::string> argv;                    ///< `${local_rank}` already substituted
  WorkerTerminal terminal = WorkerTerminal::pipes;
  bool reads_stdin = false;  ///< ddprun forwards its stdin to this worker; otherwise /dev/null
};

}  // namespace ddprun::launcher

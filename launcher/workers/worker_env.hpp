#pragma once
/// The environment of one worker: the launcher's own, plus the torchrun variables of the contract's
/// section 2. Pure: a function of values, tested without processes.
#include <optional>
#include <string>
#include <vector>

#include "launcher/base/environ.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddprun::launcher {

/// `base` plus RANK, LOCAL_RANK, ..., TORCHELASTIC_*, MASTER_ADDR/PORT for `spec`: what torchrun 2.11
/// gives its workers, TORCHELASTIC_SIGNALS_TO_HANDLE included. Variables the contract marks "unless
/// already set" (OMP_NUM_THREADS, TORCH_NCCL_ASYNC_ERROR_HANDLING) keep the user's value.
/// NCCL_ASYNC_ERROR_HANDLING, the name PyTorch 1.x reads and 2.x warns about (twice per rank), is
/// added (unless set) only with spec.libtorch_1; for Python workers ddprun's sitecustomize.py adds
/// it when the worker's own torch is 1.x (docs/reference.md, "Worker environment"). With spec.python_dir, PYTHONPATH is that folder then the user's PYTHONPATH as it
/// was (python_path_with), for every worker: a worker that is not Python ignores it, and a Python
/// one started by a wrapper gets it too; DDPRUN_PYTHON_STACKS_FILE and DDPRUN_STACKS_SIGNAL tell
/// ddprun's sitecustomize where to dump stacks.
Environ build_worker_env(const Environ& base, const WorkerSpec& spec);

/// PYTHONPATH with `dir` first: `dir` alone when `current` is unset or empty (an empty PYTHONPATH
/// adds nothing, while a trailing ':' would add the current folder), else "dir:current", unchanged
/// past `dir` (so the user's entries keep their order and meaning); `current` already starting with
/// "dir:" (a ddprun inside a ddprun job) stays as it is.
std::string python_path_with(const std::string& dir, const std::optional<std::string>& current);

/// TORCHELASTIC_SIGNALS_TO_HANDLE for --signals-to-handle: the signals' names joined by ",", in
/// order ("SIGTERM,SIGINT,SIGHUP,SIGQUIT", the default, as torchrun 2.11 writes it). torchrun passes
/// its flag's text on as it is; ddprun accepts more spellings ("term", "15") and writes the names,
/// because torch.distributed.elastic reads the value back with getattr(signal, name).
std::string signals_to_handle_value(const std::vector<int>& signals);

/// Whether an executable whose DT_NEEDED entries are `needed` (elf_needed) links LibTorch 1.x: one
/// of LibTorch's libraries (libtorch, libtorch_cpu, libtorch_cuda, libc10, libc10_cuda) named with a
/// 1.x soname, as Debian's libtorch 1.13 is ("libtorch.so.1.13"). LibTorch from pytorch.org and pip
/// has unversioned sonames: no sign of its version, so false (the 2.x default, which never warns).
bool links_libtorch_1(const std::vector<std::string>& needed);

/// True when ddprun sets OMP_NUM_THREADS=1 for the workers and so owes the user one warning.
bool defaults_omp_num_threads(const Environ& base, int local_world_size);

/// The warning printed once when `defaults_omp_num_threads` is true (torchrun's wording).
inline constexpr const char* kOmpWarning =
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
    "your system being overloaded, please further tune the variable for optimal performance in "
    "your application as needed.";

}  // namespace ddprun::launcher

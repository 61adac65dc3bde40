#pragma once
/// `--numa-binding`: which CPUs each worker is bound to. torchrun 2.11's rules
/// (torch/numa/binding.py) as a plain function of the machine's topology (numa_topology.hpp), the
/// CPUs ddprun may use and the GPU each worker uses, so that it is tested by table against
/// recorded machines. Like torchrun 2.11, only CPUs are bound: memory follows the first touch of
/// the bound threads, so it lands on the GPU's node without a memory policy.
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/launch_config.hpp"
#include "launcher/devices/numa_topology.hpp"

namespace ddprun::launcher {

struct NumaBinding {
  std::vector<std::optional<CpuSet>> cpus;  ///< per local rank; nothing = the worker is not bound
  std::vector<std::string> notes;           ///< one line per worker left unbound (or for the job), saying why
};

/// The GPU each worker's binding follows, as CUDA_VISIBLE_DEVICES names it: the first device of its
/// own assignment (`devices`, LaunchConfig::devices), else, as torchrun (the GPU whose CUDA index
/// is the local rank), entry `local_rank` of the inherited `visible` list, or "<local_rank>" when
/// the variable is unset; nothing when the list is too short.
std::vector<std::optional<std::string>> worker_gpu_names(const std::vector<std::optional<std::string>>& devices,
                                                         const std::optional<std::string>& visible);

/// The GPUs the job may use, as CUDA numbers them: the entries of CUDA_VISIBLE_DEVICES, or every
/// GPU of the topology ("0".."n-1") when it is unset. exclusive and core-complex share a node's
/// CPUs among the node's GPUs of this list, as torchrun shares them among torch.cuda's devices.
std::vector<std::string> job_gpu_names(const NumaTopology& topology, const std::optional<std::string>& visible);

/// Per worker: the CPUs of `mode` for its GPU (`gpu_names[local_rank]`, a CUDA index or GPU-UUID
/// prefix), within `allowed` (ddprun's own affinity). A GPU whose numa_node is -1 is on node 0 when
/// the machine has one node (as torchrun), and leaves its worker unbound with a note when it has
/// several (the node is unknown). A GPU that cannot be found, or a node with none of `allowed`,
/// leaves its worker unbound with a note; a machine without NVIDIA GPUs leaves every worker unbound
/// with one note. Throws LaunchError when `exclusive` finds fewer physical cores than GPUs on a
/// node (torchrun fails the same way).
NumaBinding decide_numa_binding(NumaMode mode, const NumaTopology& topology, const CpuSet& allowed,
                                const std::vector<std::optional<std::string>>& gpu_names,
                                const std::vector<std::string>& job_gpus);

}  // namespace ddprun::launcher

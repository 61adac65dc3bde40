#include "launcher/workers/worker_specs.hpp"

#include <utility>

#include "launcher/workers/worker_env.hpp"

namespace ddprun::launcher {

std::vector<WorkerSpec> worker_specs(const LaunchConfig& config, const WorkerCommand& command, const AttemptFacts& facts) {
  std::vector<WorkerSpec> specs;
  for (int local_rank = 0; local_rank < config.topology.nproc_per_node; ++local_rank) {
    WorkerSpec spec;
    spec.local_rank = local_rank;
    spec.rank = facts.place.rank_base + local_rank;
    spec.local_world_size = config.topology.nproc_per_node;
    spec.world_size = facts.place.world_size;
    spec.group_rank = facts.place.group_rank;
    spec.group_world_size = facts.place.group_world_size;
    spec.role = config.role;
    spec.role_rank = spec.rank;
    spec.role_world_size = spec.world_size;
    spec.master_addr = facts.master.host;
    spec.master_port = facts.master.port;
    spec.restart_count = facts.restart_count;
    spec.max_restarts = config.max_restarts;
    spec.run_id = config.rdzv_id;
    spec.use_agent_store = true;
    spec.signals_to_handle = signals_to_handle_value(config.signals_to_handle);
    spec.libtorch_1 = facts.libtorch_1;
    spec.cuda_visible_devices = config.devices.at(static_cast<std::size_t>(local_rank));
    spec.virtual_local_rank = config.virtual_local_rank;
    if (facts.numa_cpus && !facts.numa_cpus->empty()) {
      spec.cpu_affinity = facts.numa_cpus->at(static_cast<std::size_t>(local_rank));
    }
    spec.executable = command.executable;
    spec.argv = substitute_local_rank(command.argv, local_rank);
    spec.terminal = facts.terminal;
    spec.reads_stdin = config.stdin_target == StdinTarget::all || (config.stdin_target == StdinTarget::rank0 && spec.rank == 0);
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace ddprun::launcher

#include "launcher/devices/numa_plan.hpp"

#include <sched.h>

#include <cerrno>
#include <vector>

namespace ddprun::launcher {

CpuSet own_cpu_affinity() {
  // A machine may have more CPUs than a cpu_set_t holds (1024): grow until the kernel's mask fits.
  for (int count = CPU_SETSIZE; count <= (1 << 20); count *= 2) {
    cpu_set_t* set = CPU_ALLOC(count);
    const std::size_t size = CPU_ALLOC_SIZE(count);
    CPU_ZERO_S(size, set);
    if (::sched_getaffinity(0, size, set) == 0) {
      CpuSet cpus;
      for (int cpu = 0; cpu < count; ++cpu) {
        if (CPU_ISSET_S(cpu, size, set)) cpus.insert(cpu);
      }
      CPU_FREE(set);
      return cpus;
    }
    CPU_FREE(set);
    if (errno != EINVAL) break;
  }
  return {};
}

NumaBinding plan_numa_binding(const LaunchConfig& config, const Environ& env) {
  auto test_root = lookup(env, "DDPRUN_TEST_DEVICE_ROOT");
  NumaTopology topology = read_numa_topology(test_root && !test_root->empty() ? *test_root : "/");
  auto visible = lookup(env, "CUDA_VISIBLE_DEVICES");
  return decide_numa_binding(*config.numa_binding, topology, own_cpu_affinity(), worker_gpu_names(config.devices, visible),
                             job_gpu_names(topology, visible));
}

}  // namespace ddprun::launcher

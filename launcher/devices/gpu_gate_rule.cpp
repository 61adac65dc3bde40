#include "launcher/devices/gpu_gate_rule.hpp"

#include <algorithm>

#include "launcher/observe/status_render.hpp"

namespace ddprun::launcher {

std::optional<std::string> refuse_unhealthy(const std::vector<GpuState>& gpus, const GpuSight& sight,
                                            const std::vector<GpuIdentity>& known) {
  std::vector<GpuIdentity> identities;
  identities.reserve(gpus.size());
  for (const GpuState& gpu : gpus) identities.push_back(gpu.identity);
  const std::vector<unsigned int> in_sight = gpus_in_sight(sight, identities);
  for (const GpuState& gpu : gpus) {
    if (!std::binary_search(in_sight.begin(), in_sight.end(), gpu.identity.index)) continue;
    auto problem = health_problem(gpu);
    if (!problem) continue;
    GpuState named = gpu;
    auto earlier = std::find_if(known.begin(), known.end(),
                                [&](const GpuIdentity& id) { return id.index == gpu.identity.index; });
    if (earlier != known.end()) {
      if (named.identity.uuid.empty()) named.identity.uuid = earlier->uuid;
      if (named.identity.bus_id.empty()) named.identity.bus_id = earlier->bus_id;
    }
    return describe_unhealthy_gpu(named, *problem) + ": no worker started (--gpu-health off starts them anyway)";
  }
  return std::nullopt;
}

std::string describe_held(const GpuMemoryHeld& held) {
  std::string text = held.bytes > 0 ? format_bytes(held.bytes) : std::string("an unknown amount");
  text += held.pids.size() == 1 ? " by pid " : " by pids ";
  for (std::size_t i = 0; i < held.pids.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(held.pids[i]);
  }
  return text;
}

}  // namespace ddprun::launcher

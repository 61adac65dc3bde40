#pragma once
/// What each rank shows of its GPUs (job_status.hpp's RankGpu), made from one sample of the node's
/// GPUs (gpu/gpu_state.hpp): which GPUs the worker sees, what NVML said of each, how much of their
/// memory the worker's own processes hold, and the Xids seen on them. Pure, so that the status
/// monitor's mapping is tested by table.
#include <sys/types.h>

#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "launcher/gpu/gpu_state.hpp"
#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

/// The Xids of each GPU (by NVML index) since the monitor began watching: NVML reports each once,
/// to the sample after it happened, and a user needs to see it for longer than one sample.
class GpuXidLog {
 public:
  static constexpr std::size_t kKept = 8;  ///< the last Xids kept per GPU
  /// Adds the Xids a sample reported (GpuState::xids: those since the previous sample).
  void add(const std::vector<GpuState>& sample);
  std::uint64_t count(unsigned int index) const;
  std::vector<unsigned long long> last(unsigned int index) const;

 private:
  struct Seen {
    std::uint64_t count = 0;
    std::deque<unsigned long long> last;
  };
  std::map<unsigned int, Seen> by_index_;
};

/// One rank's GPUs: an entry per NVML index of `visible` (the worker's CUDA order) found in
/// `node_gpus`, with NVML's values, the memory the processes `pids` (the worker's tree) hold on it,
/// the Xids `xids` has for it and its health problem (gpu_state.hpp). A visible index the sample
/// lacks is skipped.
std::vector<RankGpu> rank_gpus(const std::vector<GpuState>& node_gpus, const std::vector<unsigned int>& visible,
                               const std::vector<pid_t>& pids, const GpuXidLog& xids);

/// A rank's GPU utilisation for the GPU straggler rule: the mean of its GPUs' known utilisation;
/// nothing when it has none known.
std::optional<double> gpu_utilisation_of(const RankStatus& rank);

}  // namespace ddprun::launcher

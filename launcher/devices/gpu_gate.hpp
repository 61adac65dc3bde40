#pragma once
/// GpuGate: what the node's GPUs must allow before an attempt's workers start (issue 27). The
/// worker group asks it before its first spawn (WorkerGroup's StartGate); it answers on the loop:
///
/// 1. Health (--gpu-health on): a GPU some worker of this node sees that NVML reports lost, needing
///    a reset, with retired pages or row remapping pending, or with uncorrectable ECC errors
///    refuses the start with one line naming it (gpu_gate_rule.hpp). The agent then fails the
///    attempt (a single node exits 1) or, elastic, the node leaves the round.
/// 2. Release (a restart, --gpu-release-timeout > 0): the start waits until the stopped workers'
///    processes hold no GPU memory, asking NVML every 100 ms (NVML has no event for memory freed)
///    and at most the timeout, after which it starts with a line saying how much is still held by
///    which pids. Nothing held: no wait beyond one NVML sample.
///
/// Without NVML (no NVIDIA driver) both pass at once and silently. A stalled NVML (the sampler's
/// deadline, gpu_sampler.hpp) passes with one line: the check cannot be made, and a stuck driver
/// call is not a reason to hold the job. All NVML calls are the sampler's, on its thread.
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/gpu/gpu_sampler.hpp"
#include "launcher/gpu/gpu_state.hpp"

namespace ddprun::launcher {

struct GpuGateSettings {
  bool health = true;                                 ///< --gpu-health
  std::chrono::milliseconds release_timeout{30000};  ///< --gpu-release-timeout; 0: no wait
  std::chrono::milliseconds poll{100};                ///< between NVML samples while memory is held
};

class GpuGate {
 public:
  using Print = std::function<void(const std::string&)>;
  /// Nothing: start. A line: the start is refused (health).
  using Done = std::function<void(std::optional<std::string> refused)>;

  /// `sampler` outlives the gate.
  GpuGate(boost::asio::io_context& io, GpuSampler& sampler, GpuGateSettings settings, Print print);
  ~GpuGate();
  GpuGate(const GpuGate&) = delete;
  GpuGate& operator=(const GpuGate&) = delete;

  /// Before a start whose workers see `sight`: the health check, then the wait for the GPU memory
  /// of `previous` (the stopped attempt's processes; empty: the first start). `done` runs once, on
  /// the loop or at once when nothing is to be asked, unless cancel() comes first. A check replaces
  /// one still running (which is then never answered).
  void check(GpuSight sight, std::vector<pid_t> previous, Done done);
  /// The start was given up (the group stopped): `done` is not called.
  void cancel();

 private:
  void ask();
  void on_sample(GpuSampleResult result);
  void answer(std::optional<std::string> refused);

  boost::asio::io_context& io_;
  GpuSampler& sampler_;
  GpuGateSettings settings_;
  Print print_;
  boost::asio::steady_timer poll_timer_;
  std::optional<Done> done_;  ///< the check in progress
  GpuSight sight_;
  std::vector<pid_t> previous_;
  bool health_checked_ = false;
  bool said_waiting_ = false;
  std::chrono::steady_clock::time_point began_;
  std::uint64_t generation_ = 0;         ///< of the check in progress: older answers are dropped
  std::vector<GpuIdentity> known_;       ///< the GPUs' identities as last read whole (a lost GPU's are lost)
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace ddprun::launcher

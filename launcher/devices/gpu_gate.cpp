#include "launcher/devices/gpu_gate.hpp"

#include <fmt/format.h>

#include "launcher/devices/gpu_gate_rule.hpp"

namespace ddprun::launcher {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

GpuGate::GpuGate(boost::asio::io_context& io, GpuSampler& sampler, GpuGateSettings settings, Print print)
    : io_(io), sampler_(sampler), settings_(settings), print_(std::move(print)), poll_timer_(io) {}

GpuGate::~GpuGate() = default;

void GpuGate::check(GpuSight sight, std::vector<pid_t> previous, Done done) {
  cancel();
  if (settings_.release_timeout.count() <= 0) previous.clear();
  if (!settings_.health && previous.empty()) return done(std::nullopt);  // nothing to ask NVML
  done_ = std::move(done);
  sight_ = std::move(sight);
  previous_ = std::move(previous);
  health_checked_ = !settings_.health;
  said_waiting_ = false;
  began_ = std::chrono::steady_clock::now();
  ask();
}

void GpuGate::cancel() {
  ++generation_;
  done_.reset();
  poll_timer_.cancel();
}

void GpuGate::ask() {
  std::weak_ptr<int> life = life_;
  sampler_.sample(std::nullopt, [this, life, generation = generation_](GpuSampleResult result) {
    if (life.expired() || generation != generation_ || !done_) return;
    on_sample(std::move(result));
  });
}

void GpuGate::on_sample(GpuSampleResult result) {
  if (result.superseded) return ask();  // the status monitor's request came after ours: ours is still wanted
  if (result.unavailable) return answer(std::nullopt);  // no NVIDIA driver: nothing to check, nothing to say
  if (auto problem = gpu_sample_problem(result)) {
    print_("GPU check skipped: " + *problem + "; the workers start without it");
    return answer(std::nullopt);
  }
  for (const GpuState& gpu : result.gpus) {
    if (gpu.identity.uuid.empty()) continue;
    if (gpu.identity.index >= known_.size()) known_.resize(gpu.identity.index + 1);
    known_[gpu.identity.index] = gpu.identity;
  }
  if (!health_checked_) {
    health_checked_ = true;
    if (auto refused = refuse_unhealthy(result.gpus, sight_, known_)) return answer(std::move(refused));
  }
  if (previous_.empty()) return answer(std::nullopt);
  const GpuMemoryHeld held = memory_held_by(result.gpus, previous_);
  if (held.pids.empty()) {
    if (said_waiting_) print_(fmt::format("GPU memory of the stopped workers freed after {:.1f} s", seconds_since(began_)));
    return answer(std::nullopt);
  }
  const auto waited = std::chrono::steady_clock::now() - began_;
  if (waited >= settings_.release_timeout) {
    print_(fmt::format("GPU memory still held after {:.0f} s (--gpu-release-timeout): {}; starting the workers anyway",
                       std::chrono::duration<double>(settings_.release_timeout).count(), describe_held(held)));
    return answer(std::nullopt);
  }
  if (!said_waiting_) {
    said_waiting_ = true;
    print_(fmt::format("waiting for the stopped workers' GPU memory to be freed: {} (at most {:.0f} s, --gpu-release-timeout)",
                       describe_held(held), std::chrono::duration<double>(settings_.release_timeout).count()));
  }
  std::weak_ptr<int> life = life_;
  poll_timer_.expires_after(std::min<std::chrono::steady_clock::duration>(settings_.poll, settings_.release_timeout - waited));
  poll_timer_.async_wait([this, life, generation = generation_](const boost::system::error_code& ec) {
    if (ec || life.expired() || generation != generation_ || !done_) return;
    ask();
  });
}

void GpuGate::answer(std::optional<std::string> refused) {
  Done done = std::move(*done_);
  done_.reset();
  ++generation_;
  done(std::move(refused));
}

}  // namespace ddprun::launcher

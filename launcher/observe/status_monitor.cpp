#include "launcher/observe/status_monitor.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace asio = boost::asio;

namespace ddprun::launcher {
namespace {

/// CLOCK_MONOTONIC in ns: what the workers' CLOCK_MONOTONIC_COARSE progress stamps are compared with.
std::int64_t monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

struct StatusMonitor::Rank {
  explicit Rank(double window_seconds) : rates(window_seconds) {}
  RankStatus status;
  std::string progress_path;               ///< from the worker's view, once started
  std::unique_ptr<ProgressFile> progress;  ///< mapped once the worker created its file
  std::unique_ptr<ProcessTree> tree;       ///< of status.pid
  RateWindow rates;
  std::vector<pid_t> pids;  ///< its tree's processes at the last sample
  ProgressRecord record;  ///< reused: its text keeps its capacity
  std::uint64_t last_ticks = 0;
  std::chrono::steady_clock::time_point last_cpu_at;
  bool has_cpu = false;
};

StatusMonitor::StatusMonitor(asio::io_context& io, StatusMonitorSettings settings, WorkerSource workers,
                             SampleHandler on_sample)
    : io_(io),
      settings_(std::move(settings)),
      workers_(std::move(workers)),
      on_sample_(std::move(on_sample)),
      timer_(io),
      clock_ticks_(std::max(1L, ::sysconf(_SC_CLK_TCK))),
      stragglers_(settings_.straggler) {}

StatusMonitor::~StatusMonitor() = default;

void StatusMonitor::begin_attempt(StatusAttempt attempt) {
  attempt_ = std::move(attempt);
  ranks_.clear();
  for (int i = 0; i < attempt_.local_world_size; ++i) {
    auto rank = std::make_unique<Rank>(settings_.rate_window_seconds);
    rank->status.rank = attempt_.rank_base + i;
    rank->status.local_rank = i;
    ranks_.push_back(std::move(rank));
  }
  stragglers_ = StragglerRule(settings_.straggler);
  gpu_stragglers_ = StragglerRule(kGpuStragglerSettings);
  gpus_changed_ = true;  // new ranks: their GPU fields are made at the next sample
  latest_.node_rank = attempt_.node_rank;
  latest_.host = attempt_.host;
  latest_.attempt = attempt_.attempt;
  latest_.restarts = attempt_.restarts;
  if (!running_) {
    running_ = true;
    schedule();
  }
}

void StatusMonitor::worker_exited(int local_rank, int exitcode, bool stopped_by_us) {
  if (local_rank < 0 || static_cast<std::size_t>(local_rank) >= ranks_.size()) return;
  Rank& rank = *ranks_[static_cast<std::size_t>(local_rank)];
  rank.status.exitcode = exitcode;
  rank.status.state = exitcode == 0 ? RankState::exited : stopped_by_us ? RankState::stopped : RankState::failed;
  rank.status.cpu_percent = 0;
  rank.status.rss_bytes = 0;
  rank.tree.reset();
}

void StatusMonitor::set_gpus(GpuSampler* sampler, GpuSight sight) {
  gpu_sampler_ = sampler;
  gpu_sight_ = std::move(sight);
  gpus_changed_ = true;
}

void StatusMonitor::pids_seen(std::vector<pid_t>& out) const {
  for (const auto& rank : ranks_) {
    if (rank->status.pid > 0) out.push_back(rank->status.pid);
    out.insert(out.end(), rank->pids.begin(), rank->pids.end());
  }
}

void StatusMonitor::ask_gpus() {
  if (gpu_sampler_ == nullptr || gpu_unavailable_ || gpu_asking_) return;  // one request at a time
  const auto now = std::chrono::steady_clock::now();
  // Due within half a status interval counts as due: samples come a little early or late.
  if (gpu_asked_at_ && now - *gpu_asked_at_ + settings_.interval / 2 < settings_.gpu_interval) return;
  gpu_asked_at_ = now;
  gpu_asking_ = true;
  std::weak_ptr<int> life = life_;
  gpu_sampler_->sample(std::nullopt, [this, life](GpuSampleResult result) {
    if (!life.expired()) on_gpus(std::move(result));
  });
}

void StatusMonitor::on_gpus(GpuSampleResult result) {
  gpu_asking_ = false;
  if (result.unavailable) {
    // No NVML here (no NVIDIA driver): a node without GPUs shows no GPU fields, and says nothing.
    gpu_unavailable_ = true;
    gpus_.clear();
    gpu_note_.clear();
    gpus_changed_ = true;
    return;
  }
  if (auto problem = gpu_sample_problem(result)) {
    // Stalled or unable to count: the last values stay, marked old by the note.
    if (!result.superseded) gpu_note_ = *problem;
    return;
  }
  gpu_note_.clear();
  xids_.add(result.gpus);
  gpus_ = std::move(result.gpus);
  gpus_changed_ = true;
}

void StatusMonitor::show_gpus() {
  if (gpus_.empty()) {
    for (auto& rank : ranks_) rank->status.gpus.clear();
    return;
  }
  std::vector<GpuIdentity> identities;
  identities.reserve(gpus_.size());
  for (const GpuState& gpu : gpus_) identities.push_back(gpu.identity);
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    Rank& rank = *ranks_[i];
    const auto& cvd = i < gpu_sight_.cuda_visible_devices.size() ? gpu_sight_.cuda_visible_devices[i] : std::nullopt;
    const VisibleGpus visible = visible_gpus(cvd, gpu_sight_.cuda_device_order, identities);
    // An exited worker holds nothing any more: its own memory is what the driver still lists for it.
    rank.status.gpus = rank_gpus(gpus_, visible.nvml_indices, rank.pids, xids_);
  }
}

void StatusMonitor::stop() {
  running_ = false;
  timer_.cancel();
}

void StatusMonitor::schedule() {
  timer_.expires_after(settings_.interval);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !running_) return;  // cancelled: the monitor may be gone
    sample_now();
    schedule();
  });
}

void StatusMonitor::sample_rank(Rank& rank, const WorkerView* view, std::chrono::steady_clock::time_point now,
                                std::int64_t now_ns) {
  RankStatus& status = rank.status;
  if (view != nullptr) {
    status.pid = view->pid;
    if (rank.progress_path.empty()) rank.progress_path = view->progress_file;
    status.output_age_seconds = view->last_line ? seconds_between(*view->last_line, now) : -1;
    if (view->exited) {
      worker_exited(view->local_rank, view->exitcode, view->stopped_by_us);
    } else {
      if (!rank.tree) rank.tree = std::make_unique<ProcessTree>(view->pid, settings_.proc_root);
      if (auto tree = rank.tree->sample()) {
        status.state = RankState::running;
        if (rank.has_cpu) {
          // Ticks of a descendant reaped by someone else than its parent leave the sum: never negative.
          const std::uint64_t delta = tree->cpu_ticks > rank.last_ticks ? tree->cpu_ticks - rank.last_ticks : 0;
          const double seconds = static_cast<double>(delta) / static_cast<double>(clock_ticks_);
          status.cpu_seconds += seconds;
          const double elapsed = seconds_between(rank.last_cpu_at, now);
          status.cpu_percent = elapsed > 0 ? 100.0 * seconds / elapsed : 0;
        } else {
          status.cpu_seconds = static_cast<double>(tree->cpu_ticks) / static_cast<double>(clock_ticks_);
        }
        rank.last_ticks = tree->cpu_ticks;
        rank.last_cpu_at = now;
        rank.has_cpu = true;
        status.rss_bytes = tree->rss_bytes;
        rank.pids = std::move(tree->pids);
      }
      // No sample: a zombie not reaped yet; its exit arrives with the next view.
    }
  }

  if (!rank.progress && !rank.progress_path.empty()) rank.progress = ProgressFile::open(rank.progress_path);
  if (!rank.progress) return;
  const ProgressRead read = rank.progress->read(rank.record);
  if (read == ProgressRead::busy) return;  // keep the last snapshot
  if (read != ProgressRead::ok) {
    status.progress.reset();
    return;
  }
  if (!status.progress) status.progress.emplace();
  ProgressSample& progress = *status.progress;
  progress.step = rank.record.step;
  progress.samples = rank.record.samples;
  progress.text = rank.record.text;
  progress.age_seconds = std::max(0.0, static_cast<double>(now_ns - rank.record.timestamp_ns) / 1e9);
  rank.rates.add(static_cast<double>(now_ns) / 1e9, progress.step, progress.samples);
  if (auto rates = rank.rates.rates()) {
    progress.steps_per_second = rates->steps_per_second;
    progress.samples_per_second = rates->samples_per_second;
  }
}

void StatusMonitor::sample_now() {
  const auto now = std::chrono::steady_clock::now();
  const std::int64_t now_ns = monotonic_ns();
  views_.clear();
  if (workers_) workers_(views_);
  std::vector<bool> seen(ranks_.size(), false);
  for (const WorkerView& view : views_) {
    const auto i = static_cast<std::size_t>(view.local_rank);
    if (i >= ranks_.size()) continue;
    seen[i] = true;
    sample_rank(*ranks_[i], &view, now, now_ns);
  }
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (!seen[i]) sample_rank(*ranks_[i], nullptr, now, now_ns);  // not started yet, or its group is gone
  }

  std::vector<std::optional<double>> rates(ranks_.size());
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    const RankStatus& status = ranks_[i]->status;
    if (status.state == RankState::running && status.progress && ranks_[i]->rates.rates()) {
      rates[i] = status.progress->steps_per_second;
    }
  }
  const std::vector<bool> stragglers = stragglers_.update(rates, peer_rates_);
  // The ranks' GPU fields change with a GPU sample (every gpu_interval), not with every /proc one;
  // so does the GPU straggler rule, which counts GPU samples (a status sample every 0.1 s must not
  // count one low reading five times).
  if (std::exchange(gpus_changed_, false)) {
    show_gpus();
    std::vector<std::optional<double>> utilisation(ranks_.size());
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      if (ranks_[i]->status.state == RankState::running) utilisation[i] = gpu_utilisation_of(ranks_[i]->status);
    }
    const std::vector<bool> gpu_stragglers = gpu_stragglers_.update(utilisation);
    for (std::size_t i = 0; i < ranks_.size(); ++i) ranks_[i]->status.gpu_straggler = gpu_stragglers[i];
  }
  latest_.ranks.resize(ranks_.size());
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    ranks_[i]->status.straggler = stragglers[i];
    if (ranks_[i]->status.state != RankState::running) ranks_[i]->status.gpu_straggler = false;
    latest_.ranks[i] = ranks_[i]->status;
  }
  latest_.gpu_note = gpu_note_;
  latest_.warm.clear();
  if (warm_) warm_(latest_.warm);
  latest_.sampled_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (on_sample_) on_sample_(latest_);
  ask_gpus();  // shown by the next sample
}

}  // namespace ddprun::launcher

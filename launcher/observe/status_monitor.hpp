#pragma once
/// StatusMonitor: about once a second, on the agent's loop, what each worker of this node is doing,
/// as a NodeStatus (job_status.hpp) handed to one callback (StatusWatch's, which shows it on the
/// console and passes it on to its listeners: the hang watch, the job board).
///
/// Per rank: its state (from the worker group), CPU % and RSS of its whole process tree
/// (proc_sample.hpp), seconds since its last complete output line, and what it reports on its
/// progress channel (progress_reader.hpp): step, samples, text, their rates over a window
/// (rate_window.hpp), and whether it straggles (straggler_rule.hpp).
///
/// Per rank also its GPUs (rank_gpus.hpp), when the agent lends the monitor its GPU sampler: each
/// sample asks the sampler for every GPU of the node and shows the answer that came since the last
/// sample, so the GPU fields are at most one interval old. The sampler makes its NVML calls on its
/// own thread (gpu/gpu_sampler.hpp), every gpu_interval (2 s): a stalled driver leaves the last values and a note
/// (NodeStatus::gpu_note) and never holds a sample back. A rank whose GPUs idle while the others'
/// work is a GPU straggler (straggler_rule.hpp's kGpuStragglerSettings).
///
/// Nothing here blocks or sleeps: a sample is a few /proc reads per process of the job and a look
/// at each mapped progress file; no thread, one steady_timer. A sample of 8 simple workers costs
/// tens of microseconds.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launcher/gpu/gpu_sampler.hpp"
#include "launcher/observe/job_status.hpp"
#include "launcher/observe/rank_gpus.hpp"
#include "launcher/observe/proc_sample.hpp"
#include "launcher/observe/progress_reader.hpp"
#include "launcher/observe/rate_window.hpp"
#include "launcher/observe/straggler_rule.hpp"
#include "launcher/base/worker_view.hpp"

namespace ddprun::launcher {

struct StatusMonitorSettings {
  std::chrono::milliseconds interval{1000};
  double rate_window_seconds = 10;  ///< rates (and so the straggler rule) over this many seconds
  StragglerSettings straggler;
  std::string proc_root = "/proc";
  /// How often the node's GPUs are asked for (when a GPU sampler is lent): every sample's /proc
  /// reads are cheap, a GPU sample is a dozen driver calls per GPU; 2 s keeps its cost near the
  /// rest of the status and is finer than any metrics scrape.
  std::chrono::milliseconds gpu_interval{2000};
};

/// One attempt's workers, as the agent starts them.
struct StatusAttempt {
  int attempt = 0;      ///< the log folder's attempt_<n>
  int restarts = 0;     ///< restarts so far
  int rank_base = 0;    ///< global rank of local rank 0
  int node_rank = 0;
  std::string host;
  int local_world_size = 0;  ///< workers of this node
};


class StatusMonitor {
 public:
  /// Fills its argument with the current attempt's started workers (WorkerGroup::describe); may
  /// leave it empty (between attempts).
  using WorkerSource = std::function<void(std::vector<WorkerView>&)>;
  using SampleHandler = std::function<void(const NodeStatus&)>;
  /// Fills its argument with the interpreters waiting to become workers (--preload); may leave it empty.
  using WarmSource = std::function<void(std::vector<WarmInterpreter>&)>;

  StatusMonitor(boost::asio::io_context& io, StatusMonitorSettings settings, WorkerSource workers,
                SampleHandler on_sample);
  ~StatusMonitor();
  StatusMonitor(const StatusMonitor&) = delete;
  StatusMonitor& operator=(const StatusMonitor&) = delete;

  void set_warm_source(WarmSource warm) { warm_ = std::move(warm); }
  /// Each sample asks `sampler` (the agent's; it outlives the monitor) for the node's GPUs and shows
  /// them per rank as `sight` says. Null: no GPU fields.
  void set_gpus(GpuSampler* sampler, GpuSight sight);
  /// Every process of this attempt's workers the samples have seen (each worker's pid and its tree's
  /// processes at their last sample): whose GPU memory a restart waits for.
  void pids_seen(std::vector<pid_t>& out) const;
  /// A new attempt: ranks start over (no rates, no stragglers), and sampling starts if it had not.
  void begin_attempt(StatusAttempt attempt);
  /// A worker of this attempt exited (known at once, while its group may be gone by the next sample).
  void worker_exited(int local_rank, int exitcode, bool stopped_by_us);
  /// No more samples (the job ends).
  void stop();
  /// Samples now and hands the sample on (the timer does this each interval).
  void sample_now();
  /// The last sample.
  const NodeStatus& latest() const { return latest_; }
  int hangs() const { return latest_.hangs; }
  /// The hang watch counts its detections here, so that every sample carries them.
  void count_hang() { ++latest_.hangs; }
  /// Multi-node: the step rates of the job's ranks on other nodes, as their agents last published
  /// them; the straggler rule's line is then the job's median (straggler_rule.hpp). Empty = this
  /// node's ranks alone (one node, or no board).
  void set_peer_rates(std::vector<double> rates) { peer_rates_ = std::move(rates); }
  /// The median step rate the last sample judged stragglers against (0 when it could judge none).
  double straggler_median() const { return stragglers_.median(); }
  /// The median GPU utilisation (percent) the last sample judged GPU stragglers against.
  double gpu_straggler_median() const { return gpu_stragglers_.median(); }
  /// Whether that median took in other nodes' ranks.
  bool straggler_median_is_jobs() const { return !peer_rates_.empty(); }

 private:
  struct Rank;
  void schedule();
  void sample_rank(Rank& rank, const WorkerView* view, std::chrono::steady_clock::time_point now,
                   std::int64_t now_ns);
  void show_gpus();
  void ask_gpus();
  void on_gpus(GpuSampleResult result);

  boost::asio::io_context& io_;
  StatusMonitorSettings settings_;
  WorkerSource workers_;
  WarmSource warm_;
  SampleHandler on_sample_;
  boost::asio::steady_timer timer_;
  bool running_ = false;
  long clock_ticks_;
  StatusAttempt attempt_;
  std::vector<std::unique_ptr<Rank>> ranks_;  ///< by local rank
  std::vector<WorkerView> views_;             ///< reused each sample
  StragglerRule stragglers_;
  std::vector<double> peer_rates_;
  NodeStatus latest_;
  GpuSampler* gpu_sampler_ = nullptr;
  GpuSight gpu_sight_;
  bool gpu_asking_ = false;      ///< a request is out; its answer comes as a handler
  std::optional<std::chrono::steady_clock::time_point> gpu_asked_at_;  ///< the last request
  bool gpu_unavailable_ = false;  ///< no NVML here: never asked again, no GPU fields
  std::vector<GpuState> gpus_;   ///< the last sample of the node's GPUs
  bool gpus_changed_ = false;    ///< since the ranks' GPU fields were made (a GPU sample, a new attempt)
  std::string gpu_note_;
  GpuXidLog xids_;
  StragglerRule gpu_stragglers_{kGpuStragglerSettings};
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  ///< the sampler's answers hold it weakly
};

}  // namespace ddprun::launcher

#pragma once
/// StatusWatch: this node's live status — the status monitor that samples the workers about once a
/// second (status_monitor.hpp), the one place each sample goes, and what the console shows of it:
/// the block at the bottom of a terminal, --status-interval's lines, a line and an event when a rank
/// becomes a straggler. Other observers (the hang watch, the job board) listen to its samples.
///
/// Sampling costs nothing until something reads it: without the block, --status-interval, a hang
/// timeout or a status port, the monitor is made at the first request (ensure_samples).
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/base/worker_view.hpp"
#include "launcher/observe/attempt_view.hpp"
#include "launcher/observe/job_status.hpp"
#include "launcher/observe/status_monitor.hpp"

namespace ddprun::launcher {

class ConsoleWriter;
class EventRecorder;
class GpuSampler;
class StatusMonitor;
struct StatusMonitorSettings;

struct StatusWatchSettings {
  bool block = true;            ///< --status auto or on: a block when stdout is a live terminal
  bool block_insisted = false;  ///< --status on: say so when there can be none
  bool color = false;           ///< the block may use colour (NO_COLOR, CLICOLOR_FORCE, a terminal)
  double interval_s = 0;        ///< --status-interval; 0: no status lines
  /// Another reader wants samples from the start (--hang-timeout, --status-port).
  bool samples_wanted = false;
  std::string host;
  int nproc_per_node = 1;
};

class StatusWatch {
 public:
  using Listener = std::function<void(const NodeStatus&)>;
  /// Fills its argument with the current attempt's started workers; may leave it empty.
  using WorkerSource = std::function<void(std::vector<WorkerView>&)>;

  StatusWatch(boost::asio::io_context& io, ConsoleWriter& out, StatusWatchSettings settings,
              const AttemptView& attempt, EventRecorder& events, WorkerSource workers);
  ~StatusWatch();
  StatusWatch(const StatusWatch&) = delete;
  StatusWatch& operator=(const StatusWatch&) = delete;

  /// --preload: where each sample finds the interpreters waiting to become workers.
  void set_warm_source(std::function<void(std::vector<WarmInterpreter>&)> warm);

  /// Each sample shows the ranks' GPUs from `sampler` (the agent's, which outlives this watch), as
  /// `sight` says which GPUs each worker sees (status_monitor.hpp).
  void set_gpus(GpuSampler* sampler, GpuSight sight);

  /// Every sample, after the console's share, in the order added.
  void add_listener(Listener listener);

  /// An attempt's workers are being started (the view says which attempt).
  void attempt_started();
  /// That attempt's workers are all gone.
  void attempt_ended();
  /// A worker of this attempt exited (known at once, while its group may be gone by the next sample).
  void worker_exited(int local_rank, int exitcode, bool stopped_by_us);
  /// A reader needs samples: the monitor is made now when nothing had asked before; before the
  /// first sample, or when samples have stopped coming, one is taken now.
  void ensure_samples();
  /// The job ends: no more samples, the block taken off the terminal.
  void end();

  /// Null until something reads the samples.
  StatusMonitor* monitor() { return monitor_.get(); }
  /// The last sample (empty before the monitor exists).
  const NodeStatus& latest() const;

 private:
  void make_monitor(const StatusMonitorSettings& settings);
  void on_sample(const NodeStatus& node);
  void show(const NodeStatus& node);
  void note_stragglers(const NodeStatus& node);
  void note_gpu_stragglers(const NodeStatus& node);
  void note_gpu_note(const NodeStatus& node);

  boost::asio::io_context& io_;
  ConsoleWriter& out_;
  StatusWatchSettings settings_;
  const AttemptView& attempt_;
  EventRecorder& events_;
  WorkerSource workers_;
  std::function<void(std::vector<WarmInterpreter>&)> warm_;
  std::vector<Listener> listeners_;
  std::unique_ptr<StatusMonitor> monitor_;  ///< null: nothing reads the samples
  bool block_ = false;                      ///< the block is drawn
  bool attempt_running_ = false;            ///< workers started and not all gone
  std::chrono::steady_clock::time_point next_line_;  ///< --status-interval
  std::vector<int> stragglers_named_;  ///< ranks already reported as stragglers this attempt
  std::vector<int> gpu_stragglers_named_;  ///< ranks already reported as GPU stragglers this attempt
  std::string gpu_note_said_;          ///< the GPU note last printed (a stall is said once, and its end)
  GpuSampler* gpu_sampler_ = nullptr;
  GpuSight gpu_sight_;
  NodeStatus empty_;
};

}  // namespace ddprun::launcher

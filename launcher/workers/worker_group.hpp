#pragma once
/// WorkerGroup: the processes of one attempt. Spawns them, carries their output line by line,
/// reports each exit as an event, and stops them: signal each process group, wait the grace,
/// SIGKILL what is left. Knows nothing of the config or of rendezvous.
///
/// Nothing here blocks the loop: workers are spawned a batch per loop turn (so a signal is acted
/// on while 2,000 start), and a worker's pipe is not read while the console it writes to is full
/// (the worker then waits in its write, as it would on a slow terminal).
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/base/environ.hpp"
#include "launcher/base/worker_view.hpp"
#include "launcher/output/line_splitter.hpp"
#include "launcher/output/output_route.hpp"
#include "launcher/output/stderr_tail.hpp"
#include "launcher/workers/log_write_error.hpp"
#include "launcher/workers/worker_exit.hpp"
#include "launcher/workers/worker_process.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddprun::launcher {

struct WorkerGroupHandlers {
  /// Once per worker as its process exits.
  std::function<void(const WorkerExit&)> on_exit;
  /// Once, after every started worker has exited and its output has been carried to the end, and
  /// starting has ended (all started, failed, or stopped).
  std::function<void()> on_done;
  /// Once, when a worker could not be started: the message names the worker and the cause. Workers
  /// not yet started are not started; those running are the caller's to stop.
  std::function<void(const std::string&)> on_start_failed;
  /// Once per log file, at its first failed write.
  std::function<void(const LogWriteError&)> on_log_error;
  /// A worker process started; its pid is also its process group id (for the guardian).
  std::function<void(pid_t)> on_spawned;
  /// A worker that reads ddprun's stdin started: `fd` is where its input goes (its pty's master or
  /// its stdin pipe), the handler's to own and close; closed here when there is no handler.
  std::function<void(pid_t pid, int fd, bool pty)> on_stdin;
  /// A worker asked for a pty if one could be had, and got pipes: why.
  std::function<void(const std::string&)> on_pty_unavailable;
};

/// What one worker needs to start, made just before it starts. Its environment is the group's
/// base environment with the spec's variables (build_worker_env), made by the group.
struct PreparedWorker {
  WorkerSpec spec;
  WorkerRoutes routes;
};

/// Makes worker `index` (0-based, in start order); may throw LaunchError (e.g. a log file that
/// cannot be opened), which fails the start like a failed spawn.
using WorkerPreparer = std::function<PreparedWorker(std::size_t index)>;

/// Starts one worker's process: spawn_worker, or a warm interpreter made that worker (WarmPool).
/// Throws LaunchError as spawn_worker does.
using WorkerSpawner = std::function<SpawnedWorker(const WorkerSpec&, const Environ&, const SpawnSettings&)>;

class WorkerGroup {
 public:
  /// `base_env`: the environment every worker starts from (ddprun's own, as the agent keeps it).
  /// `spawner`: how each process starts; none: spawn_worker.
  WorkerGroup(boost::asio::io_context& io, WorkerGroupHandlers handlers, Environ base_env,
              SpawnSettings spawn_settings = {}, WorkerSpawner spawner = {});
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  /// Asked before the first worker is spawned (the GPU gate: devices/gpu_gate.hpp); the group
  /// spawns once it answers true (at once or later, on the loop), and starts nothing on false (the
  /// asker reports why). A stop meanwhile ends the start, and the late answer is ignored.
  using StartGate = std::function<void(std::function<void(bool go)>)>;

  /// Starts `count` workers, in order, a batch per loop turn, each made by `prepare` just before,
  /// once `gate` (if any) says go. Failures are reported through on_start_failed.
  void start(std::size_t count, WorkerPreparer prepare, StartGate gate = {});

  /// Routes a reaped child's wait status to its worker; false when the pid is not one of ours.
  bool on_child_exit(pid_t pid, int wait_status);

  /// Sends `signo` to the process group of every worker still running.
  void signal_running(int signo);

  /// Starts no more workers; `signo` to every running worker, then SIGKILL to those still running
  /// after `grace`. Output a gone worker still owes a console that has taken nothing for the drain
  /// timeout is dropped, so that a stop is never held up by a console nobody reads. `hold`: the
  /// signal goes out that much later (a worker exiting meanwhile ends on its own, not by ddprun's
  /// signal); a stop without hold asked meanwhile replaces it.
  void stop(int signo, std::chrono::milliseconds grace,
            std::chrono::milliseconds hold = std::chrono::milliseconds(0));

  std::string stderr_tail_of(int local_rank) const;

  /// Every worker started so far, in start order, into `out` (cleared first): for the status
  /// monitor's samples. Cheap: no I/O.
  void describe(std::vector<WorkerView>& out) const;

  /// ddprun's terminal changed size: each worker pty gets the new size (and its foreground process
  /// group a SIGWINCH from the kernel), as do workers started later.
  void set_window(const winsize& window);

 private:
  struct Worker;
  struct Stream;

  void spawn_batch();
  void read_stream(const std::shared_ptr<Worker>& worker, Stream& stream);
  void carry(Worker& worker, Stream& stream, std::string_view chunk, bool end);
  void write_to_file(Worker& worker, Stream& stream, const std::string& lines);
  /// --duplicate-std*-filters: `lines` to the attempt's filtered file; on a failure, says so once
  /// and writes no more of this stream there (its lines are in its log file and on the console).
  void write_to_filtered_file(Worker& worker, Stream& stream, const std::string& lines);
  void on_drain_timeout(const std::shared_ptr<Worker>& worker);
  /// Stopping: closes the worker's paused streams whose console has stalled; true when a paused
  /// stream is left to wait for its console.
  bool drop_if_console_stalled(Worker& worker);
  void close_stream(Worker& worker, Stream& stream);
  void maybe_done();
  /// `signo` now, SIGKILL after `grace`.
  void signal_stop(int signo, std::chrono::milliseconds grace);

  boost::asio::io_context& io_;
  WorkerGroupHandlers handlers_;
  Environ base_env_;
  SpawnSettings spawn_settings_;
  WorkerSpawner spawner_;
  std::vector<std::shared_ptr<Worker>> workers_;
  WorkerPreparer prepare_;
  std::size_t to_start_ = 0;
  std::size_t next_to_start_ = 0;
  bool starting_ = false;
  bool stopping_ = false;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  ///< expires with the group; see the .cpp
  boost::asio::steady_timer kill_timer_;
  boost::asio::steady_timer hold_timer_;  ///< a held stop's signal (stop's `hold`)
  unsigned hold_generation_ = 0;          ///< a held stop acts only if no stop came after it
  boost::asio::steady_timer spawn_timer_;  ///< the next batch of a start, after the loop's other events
  bool done_reported_ = false;
};

}  // namespace ddprun::launcher

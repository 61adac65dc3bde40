#pragma once
/// WarmPool: --preload's interpreters, one per local rank, started ahead of the workers they become.
///
/// A warm interpreter is started as its worker would be (spawn_worker: the same command line,
/// process group or session, ptys, cgroup, CPU binding, death with ddprun), with the environment
/// every rank shares (warm_environment) and a socket as its descriptor 3. ddprun's sitecustomize
/// (python/ddprun_warm.py) imports the modules and waits. When an attempt starts a worker, take()
/// hands the waiting interpreter over (its pid, its streams) and sends it the worker's environment;
/// from then on it is that worker, the worker group's like any other. The next attempt's
/// interpreters are started once every interpreter handed over is past its preload (so that their
/// imports never compete with the workers' own), and wait for the next start.
///
/// Warm start is given up for the rest of the job, with one line (on_cold), when an interpreter
/// reports a failed import, one that initialised CUDA, says what it should not, or dies before it
/// is handed over; the waiting ones are killed, and the workers start cold. An interpreter handed
/// over with a failed preload execs the cold command itself. Nothing here waits on an interpreter:
/// a worker's start never depends on its preload having ended.
#include <sys/ioctl.h>
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/base/environ.hpp"
#include "launcher/workers/warm_plan.hpp"
#include "launcher/workers/worker_process.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddprun::launcher {

struct WarmPoolSettings {
  std::vector<std::string> modules;  ///< --preload
  std::string python_dir;            ///< ddprun's Python modules (sitecustomize.py, ddprun_warm.py)
  Environ base_env;                  ///< what every worker starts from (the agent's)
  SpawnSettings spawn;               ///< the job's cgroup; window: at spawn (take() sets the current one)
};

struct WarmPoolHandlers {
  std::function<void(pid_t)> on_spawned;  ///< an interpreter's process group exists (the guardian's to watch)
  std::function<void(pid_t)> on_gone;     ///< one that was never handed over is reaped
  std::function<void(const std::string&)> on_cold;  ///< once: why the workers start cold from now on
};

/// One waiting interpreter, for `ddprun status`.
struct WarmView {
  int local_rank = 0;
  pid_t pid = 0;
  bool ready = false;  ///< its modules are imported (else: still importing)
};

class WarmPool {
 public:
  WarmPool(boost::asio::io_context& io, WarmPoolSettings settings, WarmPoolHandlers handlers);
  ~WarmPool();  ///< kills the interpreters still waiting (the agent reaps them)
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  /// Starts an interpreter for each spec's local rank that has none waiting: at once, 8 per turn of
  /// the loop (as the worker group starts workers), so that a signal or an exit is never held up.
  void warm(const std::vector<WorkerSpec>& specs);
  /// As warm(), once every interpreter handed over so far is past its preload (now if they are).
  void warm_next(std::vector<WorkerSpec> specs);

  /// The interpreter waiting for `spec`'s local rank, made that worker (`env`: its environment, as
  /// build_worker_env made it; `window`: ddprun's terminal size now); nothing when none waits or
  /// the one waiting was started otherwise (it is killed): the caller starts the worker cold.
  std::optional<SpawnedWorker> take(const WorkerSpec& spec, const Environ& env, const std::optional<winsize>& window);

  /// A reaped child: true when it was one of the interpreters not handed over.
  bool on_child_exit(pid_t pid, int wait_status);

  /// Warm start given up (also when the job ends): the waiting interpreters killed, no more started.
  void stop();
  bool stopped() const { return stopped_; }

  std::vector<WarmView> describe() const;
  const std::vector<std::string>& modules() const { return settings_.modules; }

 private:
  struct Interpreter;

  void spawn_batch();
  void spawn(const WorkerSpec& spec);
  void read_reports(const std::shared_ptr<Interpreter>& interpreter);
  void on_report(const std::shared_ptr<Interpreter>& interpreter, const WarmReport& report);
  void send_go(const std::shared_ptr<Interpreter>& interpreter);
  /// The socket ended: the interpreter took its "go" (or died). Handed over: one fewer preloading.
  void on_closed(const std::shared_ptr<Interpreter>& interpreter);
  void give_up(const std::string& line);
  void kill(Interpreter& interpreter);

  boost::asio::io_context& io_;
  WarmPoolSettings settings_;
  WarmPoolHandlers handlers_;
  std::map<int, std::shared_ptr<Interpreter>> waiting_;  ///< by local rank
  std::vector<std::shared_ptr<Interpreter>> killed_;     ///< killed, not reaped yet
  int handed_over_preloading_ = 0;  ///< handed over, socket still open (still importing, or "go" unread)
  std::optional<std::vector<WorkerSpec>> next_;  ///< warm_next's specs, waiting for the count above to be 0
  std::deque<WorkerSpec> to_spawn_;              ///< warm()'s, started a batch per loop turn
  boost::asio::steady_timer spawn_timer_;
  bool stopped_ = false;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  ///< handlers still queued see the pool gone
};

}  // namespace ddprun::launcher

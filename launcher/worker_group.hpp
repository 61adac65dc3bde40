#pragma once
/// WorkerGroup: the processes of one attempt. Spawns them, carries their output line by line,
/// reports each exit as an event, and stops them: signal each process group, wait the grace,
/// SIGKILL what is left. Knows nothing of the config or of rendezvous.
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "environ.hpp"
#include "line_splitter.hpp"
#include "output_route.hpp"
#include "stderr_tail.hpp"
#include "worker_spec.hpp"

namespace ddprun::launcher {

struct WorkerExit {
  int local_rank = 0;
  pid_t pid = 0;
  int exitcode = 0;  ///< torchrun's convention: exit status, or -N when killed by signal N
  std::chrono::system_clock::time_point time;
};

class WorkerGroup {
 public:
  using ExitHandler = std::function<void(const WorkerExit&)>;
  using DoneHandler = std::function<void()>;

  /// `on_exit` fires once per worker as its process exits; `on_done` once, after every worker has
  /// exited and its output has been carried to the end.
  WorkerGroup(boost::asio::io_context& io, ExitHandler on_exit, DoneHandler on_done);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  /// Starts one process per spec (in order). Throws LaunchError when one cannot start; those
  /// already started keep running and must be stopped by the caller.
  void start(const std::vector<WorkerSpec>& specs, const std::vector<Environ>& envs,
             const std::vector<WorkerRoutes>& routes);

  /// Routes a reaped child's wait status to its worker; false when the pid is not one of ours.
  bool on_child_exit(pid_t pid, int wait_status);

  /// Sends `signo` to the process group of every worker still running.
  void signal_running(int signo);

  /// `signo` to every running worker, then SIGKILL to those still running after `grace`.
  void stop(int signo, std::chrono::milliseconds grace);

  std::size_t size() const { return workers_.size(); }
  std::string stderr_tail_of(int local_rank) const;

 private:
  struct Worker;
  struct Stream;

  void read_stream(const std::shared_ptr<Worker>& worker, Stream& stream);
  void on_stream_closed(Worker& worker);
  void maybe_done(Worker& worker);

  boost::asio::io_context& io_;
  ExitHandler on_exit_;
  DoneHandler on_done_;
  std::vector<std::shared_ptr<Worker>> workers_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  ///< expires with the group; see the .cpp
  boost::asio::steady_timer kill_timer_;
  bool done_reported_ = false;
};

}  // namespace ddprun::launcher

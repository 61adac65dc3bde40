#include "worker_group.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <boost/asio/post.hpp>

#include "console.hpp"
#include "worker_process.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {
namespace {

/// How long output may still arrive after a worker exited: a descendant that escaped the
/// worker's process group (setsid) can hold the pipe open for ever, and must not hold up the job.
constexpr std::chrono::seconds kOutputDrainTimeout{2};

constexpr std::size_t kReadChunk = 64 * 1024;

int torchrun_exitcode(int wait_status) {
  if (WIFSIGNALED(wait_status)) return -WTERMSIG(wait_status);
  return WEXITSTATUS(wait_status);
}

}  // namespace

struct WorkerGroup::Stream {
  Stream(asio::io_context& io, int fd, StreamRoute r, bool stderr_stream)
      : pipe(io, fd), route(std::move(r)), is_stderr(stderr_stream) {}
  asio::posix::stream_descriptor pipe;
  StreamRoute route;
  LineSplitter splitter;
  std::array<char, kReadChunk> buffer{};
  bool is_stderr;
  bool open = true;
};

struct WorkerGroup::Worker {
  Worker(asio::io_context& io, int rank, const SpawnedWorker& spawned, const WorkerRoutes& routes)
      : local_rank(rank),
        pid(spawned.pid),
        out(io, spawned.stdout_fd, routes.out, false),
        err(io, spawned.stderr_fd, routes.err, true),
        drain_timer(io) {}
  int local_rank;
  pid_t pid;
  bool exited = false;
  bool finished = false;
  Stream out;
  Stream err;
  StderrTail tail;
  asio::steady_timer drain_timer;
};

WorkerGroup::WorkerGroup(asio::io_context& io, ExitHandler on_exit, DoneHandler on_done)
    : io_(io), on_exit_(std::move(on_exit)), on_done_(std::move(on_done)), kill_timer_(io) {}

// Handlers still queued (cancelled reads and timers) hold the workers by shared_ptr and see the
// group gone through `life_`, so destroying a group with work in flight is safe.
WorkerGroup::~WorkerGroup() {
  kill_timer_.cancel();
  for (auto& worker : workers_) {
    worker->drain_timer.cancel();
    boost::system::error_code ignored;
    worker->out.pipe.close(ignored);
    worker->err.pipe.close(ignored);
  }
}

void WorkerGroup::start(const std::vector<WorkerSpec>& specs, const std::vector<Environ>& envs,
                        const std::vector<WorkerRoutes>& routes) {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    SpawnedWorker spawned = spawn_worker(specs[i], envs[i]);
    auto worker = std::make_shared<Worker>(io_, specs[i].local_rank, spawned, routes[i]);
    workers_.push_back(worker);
    read_stream(worker, worker->out);
    read_stream(worker, worker->err);
  }
}

void WorkerGroup::read_stream(const std::shared_ptr<Worker>& worker, Stream& stream) {
  std::weak_ptr<int> life = life_;
  stream.pipe.async_read_some(
      asio::buffer(stream.buffer),
      [this, life, keep = worker, &stream](const boost::system::error_code& ec, std::size_t n) {
        if (life.expired()) return;
        std::string console_batch;
        std::string file_batch;
        auto emit = [&](std::string_view line) {
          if (stream.route.console_fd >= 0) {
            console_batch.append(stream.route.prefix).append(line).push_back('\n');
          }
          if (stream.route.file_fd >= 0) file_batch.append(line).push_back('\n');
          if (stream.is_stderr) keep->tail.add_line(line);
        };
        if (!ec) {
          stream.splitter.feed(std::string_view(stream.buffer.data(), n), emit);
        } else {
          stream.splitter.finish(emit);
        }
        if (!console_batch.empty() && !write_all(stream.route.console_fd, console_batch)) {
          stream.route.console_fd = -1;  // nobody reads our console any more; keep the files going
        }
        if (!file_batch.empty()) write_all(stream.route.file_fd, file_batch);
        if (!ec) {
          read_stream(keep, stream);
          return;
        }
        stream.open = false;
        boost::system::error_code ignored;
        stream.pipe.close(ignored);
        maybe_done(*keep);
      });
}

bool WorkerGroup::on_child_exit(pid_t pid, int wait_status) {
  for (auto& worker : workers_) {
    if (worker->pid != pid || worker->exited) continue;
    worker->exited = true;
    // Whatever the worker left in its process group goes with it: no worker outlives its main process.
    ::kill(-pid, SIGKILL);
    std::weak_ptr<int> life = life_;
    worker->drain_timer.expires_after(kOutputDrainTimeout);
    worker->drain_timer.async_wait([life, keep = worker](const boost::system::error_code& ec) {
      if (ec || life.expired()) return;
      boost::system::error_code ignored;
      keep->out.pipe.cancel(ignored);  // the pending reads complete with an error: stream closed
      keep->err.pipe.cancel(ignored);
    });
    on_exit_(WorkerExit{worker->local_rank, pid, torchrun_exitcode(wait_status),
                        std::chrono::system_clock::now()});
    maybe_done(*worker);
    return true;
  }
  return false;
}

void WorkerGroup::maybe_done(Worker& worker) {
  if (worker.finished || !worker.exited || worker.out.open || worker.err.open) return;
  worker.finished = true;
  worker.drain_timer.cancel();
  for (const auto& w : workers_) {
    if (!w->finished) return;
  }
  if (done_reported_) return;
  done_reported_ = true;
  kill_timer_.cancel();
  // Posted, so that the handler may destroy this group without pulling it from under our feet.
  std::weak_ptr<int> life = life_;
  asio::post(io_, [this, life] {
    if (!life.expired()) on_done_();
  });
}

void WorkerGroup::signal_running(int signo) {
  for (const auto& worker : workers_) {
    if (!worker->exited) ::kill(-worker->pid, signo);
  }
}

void WorkerGroup::stop(int signo, std::chrono::milliseconds grace) {
  signal_running(signo);
  std::weak_ptr<int> life = life_;
  kill_timer_.expires_after(grace);
  kill_timer_.async_wait([this, life](const boost::system::error_code& ec) {
    if (ec || life.expired()) return;
    signal_running(SIGKILL);
  });
}

std::string WorkerGroup::stderr_tail_of(int local_rank) const {
  for (const auto& worker : workers_) {
    if (worker->local_rank == local_rank) return worker->tail.text();
  }
  return {};
}

}  // namespace ddprun::launcher

#include "launcher/workers/worker_group.hpp"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

#include "launcher/output/console_writer.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/output/live_region.hpp"
#include "launcher/base/safe_kill.hpp"
#include "launcher/workers/worker_env.hpp"
#include "launcher/workers/worker_process.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {
namespace {

/// torchrun's duplicate filter: the line contains any of the texts.
bool matches_any(std::string_view line, const std::vector<std::string>& filters) {
  for (const auto& filter : filters) {
    if (line.find(filter) != std::string_view::npos) return true;
  }
  return false;
}

/// How long output may still arrive after a worker exited: a descendant that escaped the
/// worker's process group (setsid) can hold the pipe open for ever, and must not hold up the job.
constexpr std::chrono::seconds kOutputDrainTimeout{2};
/// While the group is stopping, a console that has taken nothing for this long is stalled: the
/// output still owed to it is dropped rather than holding up the stop.
constexpr std::chrono::milliseconds kStalledConsole{200};

constexpr std::size_t kReadChunk = 64 * 1024;

/// Workers started per loop turn: a fork+exec takes about a millisecond (more on a busy machine),
/// so a signal or an exit waits at most a few tens of milliseconds behind a start of thousands.
constexpr std::size_t kSpawnBatch = 8;

/// Writes all of `text` to `fd`, a regular file (open_log_file refuses anything else: the loop
/// never waits on a reader), retrying EINTR; the errno text of what stopped it, or nothing when
/// every byte was written.
std::optional<std::string> write_whole(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n > 0) {
      text.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return std::string(n < 0 ? std::strerror(errno) : "nothing written");
  }
  return std::nullopt;
}

int torchrun_exitcode(int wait_status) {
  if (WIFSIGNALED(wait_status)) return -WTERMSIG(wait_status);
  return WEXITSTATUS(wait_status);
}

}  // namespace

struct WorkerGroup::Stream {
  Stream(asio::io_context& io, int fd, StreamRoute r, bool stderr_stream, int live_source)
      : pipe(io, fd), route(std::move(r)), is_stderr(stderr_stream), live_key(live_source) {}
  asio::posix::stream_descriptor pipe;
  StreamRoute route;
  LineSplitter splitter;
  std::array<char, kReadChunk> buffer;  // not zeroed: 64 KiB of page faults per stream at start, for nothing
  bool is_stderr;
  int live_key;  ///< this stream's line in the console's live region
  bool open = true;
  bool paused = false;  ///< not read until its console has room
};

struct WorkerGroup::Worker {
  Worker(asio::io_context& io, int rank, const SpawnedWorker& spawned, const WorkerRoutes& routes)
      : local_rank(rank),
        pid(spawned.pid),
        pty(spawned.pty),
        out(io, spawned.stdout_fd, routes.out, false, 2 * rank),
        err(io, spawned.stderr_fd, routes.err, true, 2 * rank + 1),
        drain_timer(io) {}
  int local_rank;
  pid_t pid;
  bool pty;  ///< its streams are pty masters
  bool exited = false;
  int exitcode = 0;
  std::optional<std::chrono::steady_clock::time_point> last_line;  ///< the status monitor's "seconds since output"
  std::string progress_file;
  int stop_signal_sent = 0;  ///< the first signal ddprun sent it, if any
  bool kill_sent = false;
  Stream out;
  Stream err;
  StderrTail tail;
  asio::steady_timer drain_timer;
};

WorkerGroup::WorkerGroup(asio::io_context& io, WorkerGroupHandlers handlers, Environ base_env,
                         SpawnSettings spawn_settings, WorkerSpawner spawner)
    : io_(io),
      handlers_(std::move(handlers)),
      base_env_(std::move(base_env)),
      spawn_settings_(spawn_settings),
      spawner_(spawner ? std::move(spawner) : WorkerSpawner(spawn_worker)),
      kill_timer_(io),
      hold_timer_(io),
      spawn_timer_(io) {}

// Handlers still queued (cancelled reads and timers) hold the workers by shared_ptr and see the
// group gone through `life_`, so destroying a group with work in flight is safe.
WorkerGroup::~WorkerGroup() {
  kill_timer_.cancel();
  hold_timer_.cancel();
  spawn_timer_.cancel();
  for (auto& worker : workers_) {
    worker->drain_timer.cancel();
    boost::system::error_code ignored;
    worker->out.pipe.close(ignored);
    worker->err.pipe.close(ignored);
  }
}

void WorkerGroup::start(std::size_t count, WorkerPreparer prepare, StartGate gate) {
  prepare_ = std::move(prepare);
  to_start_ = count;
  next_to_start_ = 0;
  starting_ = true;
  workers_.reserve(count);
  if (!gate) return spawn_batch();
  std::weak_ptr<int> life = life_;
  gate([this, life](bool go) {
    if (life.expired() || !starting_ || stopping_) return;  // stop() ended the start meanwhile
    if (go) return spawn_batch();
    starting_ = false;
    prepare_ = nullptr;
    maybe_done();  // nothing was started: the group is done
  });
}

void WorkerGroup::spawn_batch() {
  std::size_t end = std::min(to_start_, next_to_start_ + kSpawnBatch);
  while (starting_ && !stopping_ && next_to_start_ < end) {
    std::size_t i = next_to_start_++;
    SpawnedWorker spawned;
    PreparedWorker prepared;
    try {
      prepared = prepare_(i);
      spawned = spawner_(prepared.spec, build_worker_env(base_env_, prepared.spec), spawn_settings_);
    } catch (const LaunchError& error) {
      starting_ = false;
      prepare_ = nullptr;
      std::weak_ptr<int> life = life_;
      asio::post(io_, [this, life, message = std::string(error.what())] {
        if (life.expired()) return;
        handlers_.on_start_failed(message);
        maybe_done();
      });
      return;
    }
    auto worker = std::make_shared<Worker>(io_, prepared.spec.local_rank, spawned, prepared.routes);
    worker->progress_file = std::move(prepared.spec.progress_file);
    workers_.push_back(worker);
    if (handlers_.on_spawned) handlers_.on_spawned(worker->pid);
    if (!spawned.pty_unavailable.empty() && handlers_.on_pty_unavailable) {
      handlers_.on_pty_unavailable(spawned.pty_unavailable);
    }
    if (spawned.stdin_fd >= 0) {
      if (handlers_.on_stdin) {
        handlers_.on_stdin(worker->pid, spawned.stdin_fd, spawned.pty);
      } else {
        ::close(spawned.stdin_fd);
      }
    }
    read_stream(worker, worker->out);
    read_stream(worker, worker->err);
  }
  if (starting_ && !stopping_ && next_to_start_ < to_start_) {
    // A timer, not a post: a posted handler runs before the signals and exits the reactor has not
    // collected yet, so a start of thousands could hold them back for seconds; a due timer goes
    // through the reactor with them.
    std::weak_ptr<int> life = life_;
    spawn_timer_.expires_after(std::chrono::seconds(0));
    spawn_timer_.async_wait([this, life](const boost::system::error_code& ec) {
      if (!ec && !life.expired()) spawn_batch();
    });
    return;
  }
  const bool was_starting = starting_;
  starting_ = false;
  prepare_ = nullptr;
  if (was_starting) maybe_done();  // stopped before all started: the group may be done already
}

void WorkerGroup::read_stream(const std::shared_ptr<Worker>& worker, Stream& stream) {
  std::weak_ptr<int> life = life_;
  stream.paused = false;
  stream.pipe.async_read_some(
      asio::buffer(stream.buffer),
      [this, life, keep = worker, &stream](const boost::system::error_code& ec, std::size_t n) {
        if (life.expired() || !stream.open) return;
        carry(*keep, stream, std::string_view(stream.buffer.data(), ec ? 0 : n), static_cast<bool>(ec));
        if (ec) return close_stream(*keep, stream);
        if (stream.route.console != nullptr && stream.route.console->full()) {
          // Back-pressure: the worker waits in its write until the console takes what it has.
          stream.paused = true;
          stream.route.console->when_room([this, life, keep, &stream] {
            if (!life.expired() && stream.open && stream.paused) read_stream(keep, stream);
          });
          return;
        }
        read_stream(keep, stream);
      });
}

void WorkerGroup::carry(Worker& worker, Stream& stream, std::string_view chunk, bool end) {
  std::string console_batch;
  std::string file_batch;
  std::string filtered_batch;
  bool any_line = false;
  // The console shows what a `\r`-updated line shows in the end, not each of its frames; the log
  // file keeps the bytes as written.
  auto emit = [&](std::string_view line) {
    any_line = true;
    if (stream.route.console != nullptr) {
      console_batch.append(stream.route.prefix).append(last_frame(line)).push_back('\n');
    }
    if (stream.route.file_fd >= 0) file_batch.append(line).push_back('\n');
    if (stream.route.filtered_fd >= 0 && matches_any(line, stream.route.filters)) {
      filtered_batch.append(stream.route.filtered_prefix).append(last_frame(line)).push_back('\n');
    }
    if (stream.is_stderr) worker.tail.add_line(last_frame(line));
  };
  stream.splitter.feed(chunk, emit);
  if (end) stream.splitter.finish(emit);
  if (any_line) worker.last_line = std::chrono::steady_clock::now();  // one clock read per chunk, not per line
  if (stream.route.file_fd < 0) stream.splitter.drop_overwritten();
  ConsoleWriter* console = stream.route.console;
  if (console != nullptr && console->live()) {
    // On a terminal, the line begun (a progress bar, a prompt) is shown in place at the bottom.
    std::string live;
    if (std::string_view begun = last_frame(stream.splitter.pending()); !begun.empty()) {
      live.append(stream.route.prefix).append(begun);
    }
    console->write(console_batch, stream.live_key, live);
  } else if (!console_batch.empty()) {
    console->write(console_batch);
  }
  if (!file_batch.empty()) write_to_file(worker, stream, file_batch);
  if (!filtered_batch.empty()) write_to_filtered_file(worker, stream, filtered_batch);
}

void WorkerGroup::write_to_filtered_file(Worker& worker, Stream& stream, const std::string& lines) {
  // Written as the log files are. The workers of an attempt share it; each batch is whole lines.
  auto failure = write_whole(stream.route.filtered_fd, lines);
  if (!failure) return;
  LogWriteError error{worker.local_rank, stream.route.filtered_path, *failure, true};
  stream.route.filtered_fd = -1;
  if (handlers_.on_log_error) handlers_.on_log_error(error);
}

void WorkerGroup::write_to_file(Worker& worker, Stream& stream, const std::string& lines) {
  auto failure = write_whole(stream.route.file_fd, lines);
  if (!failure) return;
  // A full disk or a broken file system: say so once, and keep every line from now on (this batch
  // whole, so no line is cut) on the console instead of losing it.
  LogWriteError error{worker.local_rank, stream.route.file_path, *failure};
  stream.route.file_fd = -1;
  if (stream.route.console == nullptr && stream.route.fallback != nullptr) {
    stream.route.console = stream.route.fallback;
    stream.route.prefix = stream.route.fallback_prefix;
    std::string batch;
    std::string_view text = lines;
    while (!text.empty()) {
      auto newline = text.find('\n');
      batch.append(stream.route.prefix).append(text.substr(0, newline + 1));
      text.remove_prefix(newline + 1);
    }
    stream.route.console->write(batch);
  }
  if (handlers_.on_log_error) handlers_.on_log_error(error);
}

bool WorkerGroup::on_child_exit(pid_t pid, int wait_status) {
  for (auto& worker : workers_) {
    if (worker->pid != pid || worker->exited) continue;
    worker->exited = true;
    worker->exitcode = torchrun_exitcode(wait_status);
    // Whatever the worker left in its process group goes with it: no worker outlives its main process.
    signal_process_group(pid, SIGKILL);
    std::weak_ptr<int> life = life_;
    worker->drain_timer.expires_after(kOutputDrainTimeout);
    worker->drain_timer.async_wait([this, life, keep = worker](const boost::system::error_code& ec) {
      if (ec || life.expired()) return;
      on_drain_timeout(keep);
    });
    // Stopping: output owed to a console stalled for a while already is dropped now, not later.
    if (stopping_) drop_if_console_stalled(*worker);
    handlers_.on_exit(WorkerExit{worker->local_rank, pid, torchrun_exitcode(wait_status),
                                 std::chrono::system_clock::now(), worker->stop_signal_sent, worker->kill_sent});
    maybe_done();
    return true;
  }
  return false;
}

bool WorkerGroup::drop_if_console_stalled(Worker& worker) {
  bool waiting = false;
  for (Stream* stream : {&worker.out, &worker.err}) {
    if (!stream->open || !stream->paused) continue;
    if (stopping_ && stream->route.console->stalled_for() >= kStalledConsole) {
      close_stream(worker, *stream);  // stopping, and nobody reads the console: drop the rest
    } else {
      waiting = true;  // a console that takes what it gets: the output is still due
    }
  }
  return waiting;
}

void WorkerGroup::on_drain_timeout(const std::shared_ptr<Worker>& worker) {
  const bool waiting_for_console = drop_if_console_stalled(*worker);
  for (Stream* stream : {&worker->out, &worker->err}) {
    if (stream->open && !stream->paused) {
      boost::system::error_code ignored;
      stream->pipe.cancel(ignored);  // an escaped descendant holds it: the read ends, the stream closes
    }
  }
  if (!waiting_for_console) return;
  std::weak_ptr<int> life = life_;
  worker->drain_timer.expires_after(stopping_ ? std::chrono::steady_clock::duration(kStalledConsole)
                                              : std::chrono::steady_clock::duration(kOutputDrainTimeout));
  worker->drain_timer.async_wait([this, life, keep = worker](const boost::system::error_code& ec) {
    if (ec || life.expired()) return;
    on_drain_timeout(keep);
  });
}

void WorkerGroup::close_stream(Worker& worker, Stream& stream) {
  if (!stream.open) return;
  stream.open = false;
  stream.paused = false;
  if (stream.route.console != nullptr && stream.route.console->live()) {
    stream.route.console->write({}, stream.live_key, {});  // a dropped stream leaves no live line
  }
  boost::system::error_code ignored;
  stream.pipe.close(ignored);
  if (!worker.out.open && !worker.err.open && worker.exited) worker.drain_timer.cancel();
  maybe_done();
}

void WorkerGroup::maybe_done() {
  if (done_reported_ || starting_) return;
  for (const auto& worker : workers_) {
    if (!worker->exited || worker->out.open || worker->err.open) return;  // not finished yet
  }
  done_reported_ = true;
  kill_timer_.cancel();
  ++hold_generation_;  // nobody left to stop: a held stop is void
  hold_timer_.cancel();
  // Posted, so that the handler may destroy this group without pulling it from under our feet.
  std::weak_ptr<int> life = life_;
  asio::post(io_, [this, life] {
    if (!life.expired()) handlers_.on_done();
  });
}

void WorkerGroup::signal_running(int signo) {
  for (const auto& worker : workers_) {
    if (worker->exited) continue;
    if (signo == SIGKILL) {
      worker->kill_sent = true;
    } else if (worker->stop_signal_sent == 0 && signo != SIGUSR1 && signo != SIGUSR2 && signo != SIGSTOP &&
               signo != SIGCONT) {
      // Forwarded SIGUSR1/2 do not end a worker, by convention; SIGSTOP/SIGCONT pause it (Ctrl-Z).
      worker->stop_signal_sent = signo;
    }
    signal_process_group(worker->pid, signo);
  }
}

void WorkerGroup::stop(int signo, std::chrono::milliseconds grace, std::chrono::milliseconds hold) {
  stopping_ = true;
  const unsigned generation = ++hold_generation_;  // a stop asked now replaces one held
  hold_timer_.cancel();
  if (hold.count() > 0) {
    std::weak_ptr<int> life = life_;
    hold_timer_.expires_after(hold);
    hold_timer_.async_wait([this, life, generation, signo, grace](const boost::system::error_code& ec) {
      // The generation, not only ec: a handler already queued when the hold was replaced still runs.
      if (ec || life.expired() || generation != hold_generation_) return;
      signal_stop(signo, grace);
    });
  } else {
    signal_stop(signo, grace);
  }
  if (starting_) {
    starting_ = false;  // spawn_batch, if queued, starts no more
    prepare_ = nullptr;
    maybe_done();
  }
}

void WorkerGroup::signal_stop(int signo, std::chrono::milliseconds grace) {
  signal_running(signo);
  std::weak_ptr<int> life = life_;
  kill_timer_.expires_after(grace);
  kill_timer_.async_wait([this, life](const boost::system::error_code& ec) {
    if (ec || life.expired()) return;
    signal_running(SIGKILL);
  });
}

void WorkerGroup::set_window(const winsize& window) {
  spawn_settings_.window = window;
  for (const auto& worker : workers_) {
    if (!worker->pty || worker->exited) continue;
    for (Stream* stream : {&worker->out, &worker->err}) {
      if (stream->open) ::ioctl(stream->pipe.native_handle(), TIOCSWINSZ, &window);
    }
  }
}

void WorkerGroup::describe(std::vector<WorkerView>& out) const {
  out.clear();
  for (const auto& worker : workers_) {
    out.push_back({worker->local_rank, worker->pid, worker->exited, worker->exitcode,
                   worker->stop_signal_sent != 0 || worker->kill_sent, worker->last_line, worker->progress_file});
  }
}

std::string WorkerGroup::stderr_tail_of(int local_rank) const {
  for (const auto& worker : workers_) {
    if (worker->local_rank == local_rank) return worker->tail.text();
  }
  return {};
}

}  // namespace ddprun::launcher

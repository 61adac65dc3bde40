#include "launcher/workers/warm_pool.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>

#include "launcher/base/errors.hpp"
#include "launcher/base/signal_names.hpp"
#include "launcher/base/unique_fd.hpp"
#include "launcher/workers/worker_env.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {

struct WarmPool::Interpreter {
  Interpreter(asio::io_context& io, int fd) : control(io, fd) {}
  ~Interpreter() {
    for (int fd : {spawned.stdout_fd, spawned.stderr_fd, spawned.stdin_fd}) {
      if (fd >= 0) ::close(fd);
    }
  }
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  WarmStart start;
  SpawnedWorker spawned;  ///< its streams are ours until it is handed over
  asio::posix::stream_descriptor control;
  std::array<char, 512> buffer{};
  std::string line;  ///< the report being read, at most kWarmReportLimit bytes
  std::string go;    ///< the "go" message, written once the interpreter said hello
  bool hello = false;
  bool ready = false;
  bool failed = false;
  bool handed_over = false;
  bool closed = false;
};

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ",") + name;
  return text;
}

int torchrun_exitcode(int wait_status) {
  return WIFSIGNALED(wait_status) ? -WTERMSIG(wait_status) : WEXITSTATUS(wait_status);
}

}  // namespace

/// Interpreters started per loop turn, as WorkerGroup's kSpawnBatch: a start is a fork and an exec.
constexpr std::size_t kSpawnBatch = 8;

WarmPool::WarmPool(asio::io_context& io, WarmPoolSettings settings, WarmPoolHandlers handlers)
    : io_(io), settings_(std::move(settings)), handlers_(std::move(handlers)), spawn_timer_(io) {}

WarmPool::~WarmPool() {
  stop();
  for (auto& interpreter : killed_) {
    boost::system::error_code ignored;
    interpreter->control.close(ignored);
  }
}

void WarmPool::warm(const std::vector<WorkerSpec>& specs) {
  if (stopped_) return;
  const bool idle = to_spawn_.empty();
  to_spawn_.insert(to_spawn_.end(), specs.begin(), specs.end());
  if (idle) spawn_batch();
}

void WarmPool::spawn_batch() {
  for (std::size_t started = 0; started < kSpawnBatch && !to_spawn_.empty() && !stopped_;) {
    const WorkerSpec spec = std::move(to_spawn_.front());
    to_spawn_.pop_front();
    if (waiting_.contains(spec.local_rank)) continue;
    spawn(spec);
    ++started;
  }
  if (stopped_ || to_spawn_.empty()) return;
  // A timer, not a post, for the reason WorkerGroup::spawn_batch gives: signals and exits go first.
  std::weak_ptr<int> life = life_;
  spawn_timer_.expires_after(std::chrono::seconds(0));
  spawn_timer_.async_wait([this, life](const boost::system::error_code& ec) {
    if (!ec && !life.expired()) spawn_batch();
  });
}

void WarmPool::warm_next(std::vector<WorkerSpec> specs) {
  if (stopped_) return;
  if (handed_over_preloading_ == 0) return warm(specs);
  next_ = std::move(specs);
}

void WarmPool::spawn(const WorkerSpec& worker) {
  WorkerSpec spec = worker;
  spec.python_dir = settings_.python_dir;
  const WarmStart start = warm_start_of(spec, settings_.base_env, build_worker_env(settings_.base_env, spec));
  Environ env = start.env;
  env["DDPRUN_WARM_FD"] = "3";
  env["DDPRUN_PRELOAD"] = joined(settings_.modules);
  env["DDPRUN_WARM_PROTOCOL"] = kWarmProtocol;
  std::array<int, 2> ends{};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends.data()) != 0) {
    return give_up(std::string("warning: --preload: cannot make a socket for a warm interpreter (") +
                   std::strerror(errno) + "): the workers start cold");
  }
  UniqueFd ours(ends[0]);
  UniqueFd theirs(ends[1]);
  SpawnSettings spawn_settings = settings_.spawn;
  spawn_settings.control_fd = theirs.get();
  SpawnedWorker spawned;
  try {
    spawned = spawn_worker(spec, env, spawn_settings);
  } catch (const LaunchError& error) {
    return give_up(std::string("warning: --preload: ") + error.what() + ": the workers start cold");
  }
  theirs.reset();
  auto interpreter = std::make_shared<Interpreter>(io_, ours.release());
  interpreter->start = start;
  interpreter->spawned = spawned;
  waiting_[spec.local_rank] = interpreter;
  if (handlers_.on_spawned) handlers_.on_spawned(spawned.pid);
  read_reports(interpreter);
}

std::optional<SpawnedWorker> WarmPool::take(const WorkerSpec& spec, const Environ& env,
                                            const std::optional<winsize>& window) {
  auto it = waiting_.find(spec.local_rank);
  if (stopped_ || it == waiting_.end()) return std::nullopt;
  std::shared_ptr<Interpreter> interpreter = it->second;
  waiting_.erase(it);
  const bool has_stdin = interpreter->spawned.stdin_fd >= 0;
  if (interpreter->failed || !may_become(interpreter->start, has_stdin, spec, settings_.base_env, env)) {
    kill(*interpreter);  // started for another worker (the job's shape changed): this one starts cold
    killed_.push_back(std::move(interpreter));
    return std::nullopt;
  }
  SpawnedWorker spawned = interpreter->spawned;
  interpreter->spawned.stdout_fd = interpreter->spawned.stderr_fd = interpreter->spawned.stdin_fd = -1;
  const bool null_stdin = has_stdin && !spec.reads_stdin;  // it reopens its stdin on /dev/null at "go"
  if (null_stdin) {
    ::close(spawned.stdin_fd);
    spawned.stdin_fd = -1;
  }
  if (window && spawned.pty) {
    // Sized at its start; ddprun's terminal may have changed since.
    ::ioctl(spawned.stdout_fd, TIOCSWINSZ, &*window);
    ::ioctl(spawned.stderr_fd, TIOCSWINSZ, &*window);
  }
  interpreter->handed_over = true;
  if (!interpreter->closed) ++handed_over_preloading_;
  const std::vector<std::string> argv = spec.argv.empty() ? std::vector<std::string>{spec.executable} : spec.argv;
  interpreter->go = go_message(spec.executable, argv, exec_environment(env, spawned.pty_unavailable), null_stdin);
  if (interpreter->hello) send_go(interpreter);
  return spawned;
}

void WarmPool::send_go(const std::shared_ptr<Interpreter>& interpreter) {
  // Written by the loop as the socket takes it; an interpreter that dies meanwhile is its worker's
  // death, which the worker group sees.
  asio::async_write(interpreter->control, asio::buffer(interpreter->go),
                    [keep = interpreter](const boost::system::error_code&, std::size_t) {});
}

void WarmPool::read_reports(const std::shared_ptr<Interpreter>& interpreter) {
  std::weak_ptr<int> life = life_;
  interpreter->control.async_read_some(
      asio::buffer(interpreter->buffer),
      [this, life, interpreter](const boost::system::error_code& ec, std::size_t n) {
        if (life.expired() || interpreter->closed) return;
        if (ec) return on_closed(interpreter);
        for (std::size_t i = 0; i < n; ++i) {
          const char c = interpreter->buffer[i];
          if (c != '\n' && interpreter->line.size() < kWarmReportLimit) {
            interpreter->line.push_back(c);
            continue;
          }
          if (c != '\n') continue;  // past the limit: the rest of this line is dropped
          const WarmReport report = parse_warm_report(interpreter->line);
          interpreter->line.clear();
          on_report(interpreter, report);
          if (life.expired() || interpreter->closed) return;
        }
        read_reports(interpreter);
      });
}

void WarmPool::on_report(const std::shared_ptr<Interpreter>& interpreter, const WarmReport& report) {
  switch (report.kind) {
    case WarmReport::Kind::hello:
      interpreter->hello = true;
      if (!interpreter->go.empty()) send_go(interpreter);
      return;
    case WarmReport::Kind::ready:
      interpreter->ready = true;
      return;
    default:
      // Handed over, it execs the cold command itself on "go"; waiting, stop() kills it.
      interpreter->failed = true;
      give_up(describe_cold_start(report, interpreter->start.local_rank));
  }
}

void WarmPool::on_closed(const std::shared_ptr<Interpreter>& interpreter) {
  interpreter->closed = true;
  boost::system::error_code ignored;
  interpreter->control.close(ignored);
  if (!interpreter->handed_over) return;  // dying: on_child_exit says so
  if (--handed_over_preloading_ == 0 && next_ && !stopped_) {
    auto specs = std::move(*next_);
    next_.reset();
    warm(specs);
  }
}

bool WarmPool::on_child_exit(pid_t pid, int wait_status) {
  for (auto it = killed_.begin(); it != killed_.end(); ++it) {
    if ((*it)->spawned.pid != pid) continue;
    killed_.erase(it);
    if (handlers_.on_gone) handlers_.on_gone(pid);
    return true;
  }
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->second->spawned.pid != pid) continue;
    const int local_rank = it->first;
    waiting_.erase(it);
    if (handlers_.on_gone) handlers_.on_gone(pid);
    give_up(describe_warm_death(local_rank, describe_exitcode(torchrun_exitcode(wait_status))));
    return true;
  }
  return false;
}

void WarmPool::give_up(const std::string& line) {
  if (stopped_) return;
  if (handlers_.on_cold) handlers_.on_cold(line);
  stop();
}

void WarmPool::stop() {
  stopped_ = true;
  next_.reset();
  to_spawn_.clear();
  spawn_timer_.cancel();
  for (auto& [local_rank, interpreter] : waiting_) {
    kill(*interpreter);
    killed_.push_back(interpreter);
  }
  waiting_.clear();
}

void WarmPool::kill(Interpreter& interpreter) {
  // Not reaped yet (only on_child_exit forgets it), so its pid is still its own.
  if (::kill(-interpreter.spawned.pid, SIGKILL) != 0) ::kill(interpreter.spawned.pid, SIGKILL);
  interpreter.closed = true;
  boost::system::error_code ignored;
  interpreter.control.close(ignored);
}

std::vector<WarmView> WarmPool::describe() const {
  std::vector<WarmView> views;
  for (const auto& [local_rank, interpreter] : waiting_) {
    views.push_back(WarmView{local_rank, interpreter->spawned.pid, interpreter->ready});
  }
  return views;
}

}  // namespace ddprun::launcher

#include "launcher/observe/stack_capture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "launcher/base/own_executable.hpp"
#include "launcher/base/safe_kill.hpp"
#include "launcher/observe/stack_text.hpp"
#include "launcher/base/text.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {

int stack_dump_signal() { return SIGURG; }

bool catches_signal(std::string_view status, int signo) {
  if (signo < 1 || signo > 64) return false;
  auto at = status.find("SigCgt:");
  if (at == std::string_view::npos) return false;
  std::string_view rest = trim(status.substr(at + 7));
  rest = rest.substr(0, rest.find('\n'));
  std::uint64_t mask = 0;
  for (char c : rest) {
    int digit = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (digit < 0) break;
    mask = (mask << 4) | static_cast<std::uint64_t>(digit);
  }
  return (mask >> (signo - 1)) & 1u;
}

StackSignalCheck check_stack_signal(std::string_view stat, std::string_view status, pid_t agent, int signo) {
  // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so from the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos || close + 2 >= stat.size()) return StackSignalCheck::gone;
  std::string_view rest = stat.substr(close + 2);  // "STATE PPID ..."
  if (rest.front() == 'Z' || rest.front() == 'X') return StackSignalCheck::gone;
  const auto space = rest.find(' ');
  if (space == std::string_view::npos) return StackSignalCheck::gone;
  const std::string_view field = rest.substr(space + 1, rest.find(' ', space + 1) - (space + 1));
  if (field.empty() || field.size() > 9) return StackSignalCheck::gone;
  pid_t parent = 0;
  for (char c : field) {
    if (c < '0' || c > '9') return StackSignalCheck::gone;
    parent = parent * 10 + (c - '0');
  }
  if (parent != agent) return StackSignalCheck::not_ours;
  return catches_signal(status, signo) ? StackSignalCheck::send : StackSignalCheck::not_catching;
}

namespace {

constexpr auto kPythonPoll = std::chrono::milliseconds(20);

std::string read_proc(pid_t pid, const char* name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + name);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

/// Sends the stack signal to the worker `pid`, through a pidfd pinned before /proc is read: so the
/// process checked is the process signalled (a pid reused since the status sample is another
/// parent's, or has ended by the send, which then reaches nobody). The signal's default action is
/// to ignore it (stack_dump_signal), so an exec in between makes it a no-op, never a kill. On a
/// kernel without pidfds (before 5.3), kill() after the same checks: a pid reused between the
/// checks and kill() could get the signal, which a process that does not catch it ignores.
/// Empty: sent; otherwise why not.
std::string send_stack_signal(pid_t pid, int signo) {
  UniqueFd pin = pin_process(pid);
  if (pin.get() < 0 && errno != ENOSYS) {
    return errno == ESRCH ? "pid " + std::to_string(pid) + " has exited" : "cannot signal pid " + std::to_string(pid);
  }
  switch (check_stack_signal(read_proc(pid, "stat"), read_proc(pid, "status"), ::getpid(), signo)) {
    case StackSignalCheck::send:
      break;
    case StackSignalCheck::gone:
      return "pid " + std::to_string(pid) + " has exited";
    case StackSignalCheck::not_ours:
      return "pid " + std::to_string(pid) + " is no longer this job's worker (it exited)";
    case StackSignalCheck::not_catching:
      return "no Python frames (not a Python worker with ddprun's faulthandler)";
  }
  const bool sent = pin.get() >= 0 ? signal_pinned(pin, signo) : signal_process(pid, signo);
  if (sent) return "";
  return errno == ESRCH ? "pid " + std::to_string(pid) + " has exited" : "cannot signal pid " + std::to_string(pid);
}

std::optional<std::uintmax_t> file_size(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return static_cast<std::uintmax_t>(info.st_size);
}

std::string read_range(const std::string& path, std::uintmax_t from, std::size_t most) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(from));
  std::string text(most, '\0');
  in.read(text.data(), static_cast<std::streamsize>(most));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

/// `name` itself when it holds a '/', else the first executable of that name on PATH.
std::optional<std::string> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? std::optional(name) : std::nullopt;
  const char* path = std::getenv("PATH");
  for (auto dir : split(path ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

/// "30 s", "0.3 s".
std::string seconds_text(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

/// The last line of gdb's output that says something (its error when it could not attach).
std::string last_words(const std::string& output) {
  auto lines = split(output, '\n');
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    auto line = trim(*it);
    if (!line.empty()) return std::string(line);
  }
  return "no output";
}

}  // namespace

struct StackCapture::Run : std::enable_shared_from_this<Run> {
  struct Rank {
    CapturedRank captured;
    StackTarget target;
    // Python: faulthandler's file, from `offset` on.
    bool python_pending = false;
    std::uintmax_t offset = 0;
    std::optional<std::uintmax_t> last_size;
    std::chrono::steady_clock::time_point python_deadline;
    // Native: gdb.
    bool native_pending = false;
    bool native_running = false;
    pid_t gdb = -1;
    std::unique_ptr<asio::posix::stream_descriptor> pipe;
    std::unique_ptr<asio::steady_timer> gdb_timer;
    std::array<char, 16384> buffer{};
    bool timed_out = false;

    bool digest_ready() const {
      return !python_pending && (!native_pending || !captured.python_text.empty());
    }
    bool done() const { return !python_pending && !native_pending; }
  };

  Run(asio::io_context& io, const StackCaptureSettings& settings) : io(io), settings(settings), poll(io) {}

  asio::io_context& io;
  StackCaptureSettings settings;
  std::vector<Rank> ranks;
  Handler on_digest;
  Handler on_done;
  bool digest_sent = false;
  bool finished = false;
  bool cancelled = false;
  asio::steady_timer poll;
  std::deque<std::size_t> gdb_queue;
  int gdb_running = 0;
  int gdb_limit = 2;
  std::optional<std::string> gdb_path;  ///< the native reader: ddprun-unwind or gdb
  bool unwinder = false;                ///< gdb_path is ddprun-unwind

  void begin() {
    gdb_limit = settings.max_parallel_gdb > 0 ? settings.max_parallel_gdb
                                              : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    if (settings.native && !settings.unwinder.empty() && ::access(settings.unwinder.c_str(), X_OK) == 0) {
      gdb_path = settings.unwinder;
      unwinder = true;
    } else {
      gdb_path = settings.native ? find_program(settings.gdb) : std::nullopt;
    }
    const int signo = stack_dump_signal();
    bool polling = false;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      Rank& rank = ranks[i];
      rank.native_pending = true;
      if (!settings.native) {
        rank.native_pending = false;
        rank.captured.native_note = "native frames not asked for";
      } else if (!gdb_path) {
        rank.native_pending = false;
        rank.captured.native_note = "gdb not found on PATH (install gdb for native frames)";
      }
      if (rank.target.python_stacks_file.empty()) {
        rank.captured.python_note = "no Python frames (not a Python worker with ddprun's faulthandler)";
      } else {
        // Where this dump starts: taken before the signal, which may be answered at once.
        rank.offset = file_size(rank.target.python_stacks_file).value_or(0);
        std::string why_not = send_stack_signal(rank.target.pid, signo);
        if (why_not.empty()) {
          rank.python_pending = true;
          rank.python_deadline = std::chrono::steady_clock::now() + settings.python_timeout;
          polling = true;
        } else {
          rank.captured.python_note = std::move(why_not);
        }
      }
      if (!rank.python_pending && rank.native_pending) gdb_queue.push_back(i);
    }
    if (polling) schedule_poll();
    start_gdbs();
    check();
  }

  void schedule_poll() {
    poll.expires_after(kPythonPoll);
    poll.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->cancelled) return;
      self->poll_python();
    });
  }

  /// A dump is complete once the file grew and then did not grow for one poll.
  void poll_python() {
    bool pending = false;
    const auto now = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      Rank& rank = ranks[i];
      if (!rank.python_pending) continue;
      auto size = file_size(rank.target.python_stacks_file);
      const bool grew = size && *size > rank.offset;
      const bool settled = grew && rank.last_size == size;
      rank.last_size = size;
      if (settled || now >= rank.python_deadline) {
        rank.python_pending = false;
        if (grew) {
          std::size_t length = static_cast<std::size_t>(std::min<std::uintmax_t>(*size - rank.offset, settings.max_output));
          rank.captured.python_text = read_range(rank.target.python_stacks_file, rank.offset, length);
        } else {
          rank.captured.python_note = "faulthandler wrote nothing within " +
                                      std::to_string(settings.python_timeout.count()) + " ms";
        }
        if (rank.native_pending) gdb_queue.push_back(i);
      } else {
        pending = true;
      }
    }
    if (pending) schedule_poll();
    start_gdbs();
    check();
  }

  void start_gdbs() {
    while (gdb_running < gdb_limit && !gdb_queue.empty()) {
      std::size_t i = gdb_queue.front();
      gdb_queue.pop_front();
      start_gdb(i);
    }
  }

  void start_gdb(std::size_t i) {
    Rank& rank = ranks[i];
    const std::string pid = std::to_string(rank.target.pid);
    std::vector<std::string> args = {*gdb_path, "-nx", "-batch", "-p", pid,
                                     "-iex", "set debuginfod enabled off", "-iex", "set auto-load off",
                                     "-ex", "set width 0", "-ex", "set print frame-arguments none",
                                     "-ex", "thread apply all bt"};
    if (unwinder) args = {*gdb_path, pid};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return native_failed(i, std::string("cannot make a pipe: ") + std::strerror(errno));
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    if (child < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      return native_failed(i, "cannot start " + reader_name() + ": " + std::strerror(errno));
    }
    if (child == 0) {
      // Only async-signal-safe calls until exec: the agent may have other threads (store servers).
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      // gdb starts as any program would: default dispositions (ddprun ignores SIGPIPE), nothing blocked.
      ::signal(SIGPIPE, SIG_DFL);
      sigset_t none;
      ::sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      if (::getppid() != parent) ::_exit(127);
      int null = ::open("/dev/null", O_RDONLY);
      if (null >= 0) ::dup2(null, 0);
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::setpgid(child, child);  // also here: no race with the kill at the timeout
    ::close(fds[1]);
    rank.gdb = child;
    rank.native_running = true;
    ++gdb_running;
    rank.pipe = std::make_unique<asio::posix::stream_descriptor>(io, fds[0]);
    rank.gdb_timer = std::make_unique<asio::steady_timer>(io);
    rank.gdb_timer->expires_after(settings.gdb_timeout);
    rank.gdb_timer->async_wait([self = shared_from_this(), i](const boost::system::error_code& ec) {
      if (ec || self->cancelled) return;
      Rank& r = self->ranks[i];
      if (!r.native_running) return;
      r.timed_out = true;
      signal_process_group(r.gdb, SIGKILL);  // its pipe closes: read_gdb sees the end
    });
    read_gdb(i);
  }

  void read_gdb(std::size_t i) {
    Rank& rank = ranks[i];
    rank.pipe->async_read_some(asio::buffer(rank.buffer), [self = shared_from_this(), i](
                                                                const boost::system::error_code& ec, std::size_t n) {
      if (self->cancelled) return;
      Rank& r = self->ranks[i];
      std::string& out = r.captured.native_text;
      if (n > 0 && out.size() < self->settings.max_output) {
        out.append(r.buffer.data(), std::min(n, self->settings.max_output - out.size()));
      }
      if (!ec) return self->read_gdb(i);
      self->gdb_ended(i);
    });
  }

  void gdb_ended(std::size_t i) {
    Rank& rank = ranks[i];
    rank.native_running = false;
    rank.native_pending = false;
    --gdb_running;
    rank.gdb_timer->cancel();
    rank.pipe.reset();
    auto threads = parse_gdb_backtrace(rank.captured.native_text);
    if (rank.timed_out) {
      rank.captured.native_note = reader_name() + " timed out after " + seconds_text(settings.gdb_timeout);
    } else if (threads.empty()) {
      rank.captured.native_note = reader_name() + ": " + last_words(rank.captured.native_text);
    }
    for (auto& thread : threads) rank.captured.stacks.threads.push_back(std::move(thread));
    start_gdbs();
    check();
  }

  std::string reader_name() const { return unwinder ? "ddprun-unwind" : "gdb"; }

  void native_failed(std::size_t i, std::string why) {
    ranks[i].native_pending = false;
    ranks[i].captured.native_note = std::move(why);
    check();
  }

  /// The values so far: Python threads first (they place the rank), then native ones.
  std::vector<CapturedRank> snapshot() const {
    std::vector<CapturedRank> out;
    for (const Rank& rank : ranks) {
      CapturedRank captured = rank.captured;
      std::vector<ThreadStack> threads = parse_faulthandler(captured.python_text);
      for (auto& thread : captured.stacks.threads) threads.push_back(std::move(thread));
      captured.stacks.threads = std::move(threads);
      if (captured.stacks.threads.empty()) {
        std::string why = captured.native_note;
        if (!captured.python_text.empty() || why.empty()) why = captured.python_note;
        captured.stacks.error = why.empty() ? "no frames" : why;
      }
      out.push_back(std::move(captured));
    }
    return out;
  }

  void check() {
    if (cancelled || finished) return;
    const bool all_ready = std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.digest_ready(); });
    const bool all_done = std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.done(); });
    auto self = shared_from_this();  // a handler may drop the StackCapture's reference
    if (all_ready && !digest_sent) {
      digest_sent = true;
      if (on_digest) on_digest(snapshot());
      if (cancelled) return;
    }
    if (all_done) {
      finished = true;
      poll.cancel();
      if (on_done) on_done(snapshot());
    }
  }

  void cancel() {
    cancelled = true;
    poll.cancel();
    for (Rank& rank : ranks) {
      if (rank.native_running) signal_process_group(rank.gdb, SIGKILL);
      rank.native_running = false;
      if (rank.gdb_timer) rank.gdb_timer->cancel();
      if (rank.pipe) rank.pipe->close();
    }
  }
};

StackCapture::StackCapture(asio::io_context& io, StackCaptureSettings settings) : io_(io), settings_(std::move(settings)) {}

StackCapture::~StackCapture() { cancel(); }

bool StackCapture::busy() const { return run_ && !run_->finished && !run_->cancelled; }

bool StackCapture::start(std::vector<StackTarget> targets, Handler on_digest, Handler on_done) {
  if (busy()) return false;
  run_ = std::make_shared<Run>(io_, settings_);
  run_->on_digest = std::move(on_digest);
  run_->on_done = std::move(on_done);
  for (auto& target : targets) {
    Run::Rank rank;
    rank.captured.stacks.rank = target.rank;
    rank.captured.stacks.node_rank = target.node_rank;
    rank.captured.stacks.pid = target.pid;
    rank.target = std::move(target);
    run_->ranks.push_back(std::move(rank));
  }
  auto run = run_;
  run->begin();
  return true;
}

void StackCapture::cancel() {
  if (run_) run_->cancel();
  run_.reset();
}

std::string stack_file_text(const CapturedRank& rank, const std::string& host, double unix_time) {
  char when[64] = "";
  std::time_t seconds = static_cast<std::time_t>(unix_time);
  std::tm local{};
  if (::localtime_r(&seconds, &local)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", &local);
  std::string text = "rank " + std::to_string(rank.stacks.rank) + " (pid " + std::to_string(rank.stacks.pid) + ") on " +
                     host + ", stacks captured by ddprun at " + when + "\n\n";
  text += "== Python frames (faulthandler, most recent call first) ==\n";
  text += rank.python_text.empty() ? rank.python_note + "\n" : rank.python_text;
  if (!text.empty() && text.back() != '\n') text += '\n';
  text += "\n== native frames (every thread, innermost first) ==\n";
  text += rank.native_text.empty() ? rank.native_note + "\n" : rank.native_text;
  if (!rank.native_text.empty() && !rank.native_note.empty()) text += "\n(" + rank.native_note + ")\n";
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text;
}

std::optional<std::string> find_unwinder() {
  auto dir = own_executable_dir();
  if (dir.empty()) return std::nullopt;
  auto path = dir / "ddprun-unwind";
  if (::access(path.c_str(), X_OK) != 0) return std::nullopt;
  return path.string();
}

std::optional<std::string> read_source_line(const std::string& path, int line) {
  if (line < 1) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text;
  std::size_t read = 0;
  for (int i = 0; i < line; ++i) {
    if (!std::getline(in, text)) return std::nullopt;
    read += text.size() + 1;
    if (read > (1u << 20)) return std::nullopt;
  }
  return std::string(trim(text));
}

}  // namespace ddprun::launcher

#include "ddprun/error_report.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <typeinfo>
#include <vector>

#include "ddprun/error.hpp"

namespace ddprun {
namespace {

constexpr int kMaxFrames = 64;
constexpr std::size_t kMaxPath = 4096;
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr std::string_view kThrowHeader = "C++ backtrace of the throw (most recent call first):\n";
constexpr std::string_view kSignalHeader = "C++ backtrace at the signal (most recent call first):\n";
constexpr std::string_view kReportHeader = "C++ backtrace at the report (most recent call first):\n";

// ---- State the signal handler reads: fixed storage, filled in before the handlers are installed.

/// The first error of a process wins: kIdle -> kWriting (one writer) -> kWritten.
enum ReportState : int { kIdle = 0, kWriting = 1, kWritten = 2 };
std::atomic<int> g_report_state{kIdle};
/// Set by the terminate handler: the SIGABRT of the abort() that follows it is no news.
std::atomic<bool> g_terminate_reported{false};
pid_t g_installer_pid = -1;
char g_error_path[kMaxPath];
char g_error_tmp_path[kMaxPath + 8];
/// backtrace_symbols_fd writes to a file descriptor only: the handler reads its lines back from
/// this pipe (both ends non-blocking: a full pipe drops frames instead of hanging).
int g_trace_pipe[2] = {-1, -1};
char g_trace_raw[64 * 1024];
char g_trace_text[80 * 1024];
struct sigaction g_previous_actions[NSIG];
std::terminate_handler g_previous_terminate = nullptr;
std::once_flag g_install_once;

static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free state");

// ---- Async-signal-safe text: fixed buffers and write(2), no allocation.

/// Appends to caller-owned storage, truncating at its end.
struct FixedText {
  char* data;
  std::size_t capacity;
  std::size_t size = 0;

  void add(std::string_view text) {
    for (char c : text) {
      if (size == capacity) return;
      data[size++] = c;
    }
  }
  void add_unsigned(std::uint64_t value) {
    char digits[20];
    int count = 0;
    do {
      digits[count++] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value != 0);
    while (count > 0) add(std::string_view(&digits[--count], 1));
  }
  void add_hex(std::uintptr_t value) {
    char digits[16];
    int count = 0;
    do {
      digits[count++] = "0123456789abcdef"[value & 0xf];
      value >>= 4;
    } while (value != 0);
    add("0x");
    while (count > 0) add(std::string_view(&digits[--count], 1));
  }
  std::string_view view() const { return {data, size}; }
};

/// Length of the well-formed UTF-8 sequence at `p` (RFC 3629, as strict JSON parsers check it), or 0.
std::size_t utf8_sequence_length(const unsigned char* p, std::size_t left) {
  const unsigned c = p[0];
  if (c < 0x80) return 1;
  std::size_t length = 0;
  unsigned low = 0x80, high = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    if (c == 0xE0) low = 0xA0;   // no overlong forms
    if (c == 0xED) high = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (left < length || p[1] < low || p[1] > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
  }
  return length;
}

/// Buffered output to a file descriptor with write(2) only.
class FdWriter {
 public:
  explicit FdWriter(int fd) : fd_(fd) {}

  void add(std::string_view text) {
    for (char c : text) put(c);
  }
  /// `text` as a JSON string: quoted, escaped, invalid UTF-8 replaced by U+FFFD so that the
  /// launcher's strict parser accepts the file whatever the message holds.
  void add_json_string(std::string_view text) {
    put('"');
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    for (std::size_t i = 0; i < text.size();) {
      const unsigned char c = bytes[i];
      if (c >= 0x80) {
        std::size_t length = utf8_sequence_length(bytes + i, text.size() - i);
        if (length == 0) {
          add("\\ufffd");
          ++i;
        } else {
          add(text.substr(i, length));
          i += length;
        }
        continue;
      }
      switch (c) {
        case '"': add("\\\""); break;
        case '\\': add("\\\\"); break;
        case '\n': add("\\n"); break;
        case '\r': add("\\r"); break;
        case '\t': add("\\t"); break;
        default:
          if (c < 0x20) {
            add("\\u00");
            put("0123456789abcdef"[c >> 4]);
            put("0123456789abcdef"[c & 0xf]);
          } else {
            put(static_cast<char>(c));
          }
      }
      ++i;
    }
    put('"');
  }
  /// Flushes; false when any write failed.
  bool finish() {
    flush();
    return ok_;
  }

 private:
  void put(char c) {
    if (used_ == sizeof buffer_) flush();
    buffer_[used_++] = c;
  }
  void flush() {
    std::size_t done = 0;
    while (done < used_ && ok_) {
      ssize_t wrote = ::write(fd_, buffer_ + done, used_ - done);
      if (wrote > 0) {
        done += static_cast<std::size_t>(wrote);
      } else if (wrote < 0 && errno == EINTR) {
        continue;
      } else {
        ok_ = false;
      }
    }
    used_ = 0;
  }

  int fd_;
  char buffer_[2048];
  std::size_t used_ = 0;
  bool ok_ = true;
};

std::int64_t epoch_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);  // async-signal-safe, unlike most of <chrono>'s callers
  return now.tv_sec;
}

/// Writes the report to `tmp_path`, then renames it over `path` (the launcher never reads half a
/// report); straight to `path` when its folder takes no new file. Async-signal-safe.
bool write_report(const char* path, const char* tmp_path, std::string_view message, std::string_view traceback,
                  std::int64_t timestamp) {
  bool via_tmp = true;
  int fd = ::open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    via_tmp = false;
    fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
  }
  char digits_storage[24];
  FixedText digits{digits_storage, sizeof digits_storage};
  digits.add_unsigned(static_cast<std::uint64_t>(timestamp < 0 ? 0 : timestamp));

  FdWriter out(fd);
  out.add(R"({"message": {"message": )");
  out.add_json_string(message);
  out.add(R"(, "extraInfo": {"py_callstack": )");
  out.add_json_string(traceback);
  out.add(R"(, "timestamp": ")");
  out.add(digits.view());
  out.add("\"}}}\n");
  bool ok = out.finish();
  ok = ::close(fd) == 0 && ok;
  if (via_tmp) {
    if (ok) ok = ::rename(tmp_path, path) == 0;
    if (!ok) ::unlink(tmp_path);
  }
  return ok;
}

/// Makes this thread the one writer of the process's report; false when another error came first
/// (waiting a while for a report in progress, so that the process does not die half-way through it).
bool claim_report() {
  int expected = kIdle;
  if (g_report_state.compare_exchange_strong(expected, kWriting)) return true;
  for (int i = 0; i < 300 && g_report_state.load() == kWriting; ++i) {
    timespec pause{0, 10'000'000};
    ::nanosleep(&pause, nullptr);
  }
  return false;
}

// ---- Fatal signals.

std::string_view signal_abbrev(int signo) {
  switch (signo) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
  }
  return "signal";
}

std::string_view signal_text(int signo) {
  switch (signo) {
    case SIGSEGV: return "Segmentation fault";
    case SIGBUS: return "Bus error";
    case SIGFPE: return "Floating-point exception";
    case SIGILL: return "Illegal instruction";
    case SIGABRT: return "Aborted";
  }
  return "Fatal signal";
}

/// The numbered frames of `frames` (symbolized by glibc, read back through the pipe) and the
/// message line, in g_trace_text. Only for the one writer (claim_report): the buffers are shared.
std::string_view signal_traceback(void* const* frames, int count, std::string_view message) {
  FixedText text{g_trace_text, sizeof g_trace_text};
  text.add(kSignalHeader);
  if (g_trace_pipe[0] >= 0) {
    while (::read(g_trace_pipe[0], g_trace_raw, sizeof g_trace_raw) > 0) {
    }  // drain leftovers
    ::backtrace_symbols_fd(frames, count, g_trace_pipe[1]);
    std::size_t got = 0;
    while (got < sizeof g_trace_raw) {
      ssize_t n = ::read(g_trace_pipe[0], g_trace_raw + got, sizeof g_trace_raw - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    std::string_view raw(g_trace_raw, got);
    for (int index = 0; !raw.empty(); ++index) {
      std::size_t end = raw.find('\n');
      std::string_view line = raw.substr(0, end);
      text.add("  #");
      text.add_unsigned(static_cast<std::uint64_t>(index));
      text.add(" ");
      text.add(line);
      text.add("\n");
      raw = end == std::string_view::npos ? std::string_view() : raw.substr(end + 1);
    }
  }
  text.add(message);
  text.add("\n");
  return text.view();
}

/// The interrupted instruction: where the backtrace of a fault starts, whatever the handler's
/// own frames and the kernel's trampoline look like. 0 where unknown.
std::uintptr_t interrupted_pc(const void* context) {
  if (context == nullptr) return 0;
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<std::uintptr_t>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return 0;
#endif
}

__attribute__((noinline)) void report_signal(int signo, const siginfo_t* info, const void* context) {
  char message_storage[256];
  FixedText message{message_storage, sizeof message_storage};
  message.add("FatalSignal: Signal ");
  message.add_unsigned(static_cast<std::uint64_t>(signo));
  message.add(" (");
  message.add(signal_abbrev(signo));
  message.add(") in PID ");
  message.add_unsigned(static_cast<std::uint64_t>(::getpid()));
  message.add(": ");
  message.add(signal_text(signo));
  if (info != nullptr && (signo == SIGSEGV || signo == SIGBUS)) {
    message.add(" at address ");
    message.add_hex(reinterpret_cast<std::uintptr_t>(info->si_addr));
  }

  void* frames[kMaxFrames];
  int count = ::backtrace(frames, kMaxFrames);
  // Start at the interrupted frame; without it, leave out this function, the handler and the
  // kernel's trampoline.
  int skip = std::min(count, 3);
  if (std::uintptr_t pc = interrupted_pc(context); pc != 0) {
    for (int i = 0; i < count; ++i) {
      if (reinterpret_cast<std::uintptr_t>(frames[i]) == pc) {
        skip = i;
        break;
      }
    }
  }

  // stderr first: it costs nothing and survives whatever follows.
  FdWriter err(STDERR_FILENO);
  err.add("ddprun: ");
  err.add(message.view());
  err.add("\n");
  err.add(kSignalHeader);
  err.finish();
  ::backtrace_symbols_fd(frames + skip, count - skip, STDERR_FILENO);

  if (::getpid() != g_installer_pid || g_error_path[0] == '\0' || !claim_report()) return;
  const std::int64_t now = epoch_seconds();
  // A short report first: if symbolizing the backtrace crashes, the cause is already on disk.
  FixedText short_trace{g_trace_text, sizeof g_trace_text};
  short_trace.add(message.view());
  short_trace.add("\n");
  write_report(g_error_path, g_error_tmp_path, message.view(), short_trace.view(), now);
  std::string_view traceback = signal_traceback(frames + skip, count - skip, message.view());
  write_report(g_error_path, g_error_tmp_path, message.view(), traceback, now);
  g_report_state.store(kWritten);
}

/// Restores the disposition the handler replaced (default when it was "ignore": a fault cannot be
/// ignored) and raises the signal again: it is delivered when the handler returns, so the process
/// dies of it (or a previous handler, a crash reporter, gets its turn).
void reraise(int signo) {
  struct sigaction previous = g_previous_actions[signo];
  if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_IGN) {
    previous = {};
    previous.sa_handler = SIG_DFL;
    sigemptyset(&previous.sa_mask);
  }
  ::sigaction(signo, &previous, nullptr);
  ::raise(signo);
}

/// A report must never turn a crash into a hang (a lock held by the crashed code, say, that
/// backtrace_symbols_fd's dladdr wants): if it takes longer than this, SIGALRM ends the process.
constexpr unsigned kWatchdogSeconds = 10;

void arm_watchdog() {
  struct sigaction default_action{};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(SIGALRM, &default_action, nullptr);
  sigset_t alarm_only;
  sigemptyset(&alarm_only);
  sigaddset(&alarm_only, SIGALRM);
  ::pthread_sigmask(SIG_UNBLOCK, &alarm_only, nullptr);
  ::alarm(kWatchdogSeconds);
}

void on_fatal_signal(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  arm_watchdog();
  if (!(signo == SIGABRT && g_terminate_reported.load())) report_signal(signo, info, context);
  reraise(signo);
  errno = saved_errno;
}

// ---- Backtraces and exceptions outside signal handlers (allocation allowed).

std::string demangle(const char* name) {
  int status = 0;
  char* readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && readable != nullptr ? readable : name;
  std::free(readable);
  return out;
}

/// "module(_Z3fooi+0x1f) [0x...]" -> "module(foo(int)+0x1f) [0x...]".
std::string demangle_frame(std::string_view line) {
  std::size_t open = line.find('(');
  std::size_t plus = open == std::string_view::npos ? open : line.find('+', open);
  if (plus == std::string_view::npos || plus == open + 1 || line.substr(open + 1, 2) != "_Z") return std::string(line);
  std::string symbol(line.substr(open + 1, plus - open - 1));
  return std::string(line.substr(0, open + 1)) + demangle(symbol.c_str()) + std::string(line.substr(plus));
}

/// This thread's return addresses, most recent first, without the first `skip`.
__attribute__((noinline)) std::vector<void*> capture_frames(int skip) {
  void* frames[kMaxFrames];
  int count = ::backtrace(frames, kMaxFrames);
  return std::vector<void*>(frames + std::min(skip, count), frames + count);
}

/// "  #i module(function+0x1f) [0x...]" lines for frames[first..].
std::string numbered(const std::vector<void*>& frames, std::size_t first) {
  std::string text;
  if (first >= frames.size()) return text;
  char** symbols = ::backtrace_symbols(frames.data() + first, static_cast<int>(frames.size() - first));
  if (symbols == nullptr) return text;
  for (std::size_t i = 0; i + first < frames.size(); ++i) {
    text += "  #" + std::to_string(i) + " " + demangle_frame(symbols[i]) + "\n";
  }
  std::free(symbols);
  return text;
}

void* module_base(const void* address) {
  Dl_info info{};
  return ::dladdr(address, &info) != 0 ? info.dli_fbase : nullptr;
}

/// Where the throw site starts in a backtrace taken by the terminate handler: after the handler's
/// own frames and the C++ runtime's (std::terminate, __cxa_throw or __cxa_call_terminate, which
/// its symbols do not always name: the path to terminate is in .cold parts). An exception nobody
/// catches is not unwound, so the thrower's frames are still there; past a noexcept function the
/// stack is unwound up to that function.
std::size_t throw_site_index(const std::vector<void*>& frames) {
  void* runtime = module_base(reinterpret_cast<const void*>(&std::terminate));
  void* self = module_base(reinterpret_cast<const void*>(&throw_site_index));
  // A statically linked C++ runtime shares our module: nothing to tell frames apart by.
  if (runtime == nullptr || runtime == self) return 0;
  std::size_t i = 0;
  while (i < frames.size() && module_base(frames[i]) != runtime) ++i;  // the handler's frames
  while (i < frames.size() && module_base(frames[i]) == runtime) ++i;  // the C++ runtime's
  return i < frames.size() ? i : 0;
}

/// "<type>: <what()>" of the exception in flight; `location` gets ddprun::Error's file:line.
std::string describe_current_exception(std::string& location) {
  std::exception_ptr current = std::current_exception();
  if (!current) return "std::terminate: called without an active exception";
  const std::type_info* type = abi::__cxa_current_exception_type();
  std::string name = type != nullptr ? demangle(type->name()) : "unknown exception";
  try {
    std::rethrow_exception(current);
  } catch (const Error& e) {
    location = std::string(e.file()) + ":" + std::to_string(e.line());
    return name + ": " + e.what();
  } catch (const std::exception& e) {
    return name + ": " + e.what();
  } catch (...) {
    return name + ": (not derived from std::exception)";
  }
}

/// The report from ordinary code: claims the process's one report, writes it to
/// TORCHELASTIC_ERROR_FILE as it is now.
void record_report(std::string_view message, std::string_view traceback) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') return;
  if (!claim_report()) return;
  std::string tmp_path = std::string(path) + ".tmp";
  if (!write_report(path, tmp_path.c_str(), message, traceback, epoch_seconds())) {
    std::fprintf(stderr, "ddprun: could not write the error file %s: %s\n", path, std::strerror(errno));
  }
  g_report_state.store(kWritten);
}

[[noreturn]] void on_terminate() {
  g_terminate_reported.store(true);
  arm_watchdog();
  std::vector<void*> frames = capture_frames(0);
  std::string location;
  std::string message = describe_current_exception(location);
  std::string traceback = std::string(kThrowHeader) + numbered(frames, throw_site_index(frames));
  if (!location.empty()) traceback += "thrown at " + location + "\n";
  traceback += message + "\n";
  std::fprintf(stderr, "ddprun: uncaught exception\n%s", traceback.c_str());
  std::fflush(stderr);
  if (::getpid() == g_installer_pid) record_report(message, traceback);
  // A user's own terminate handler gets its turn; libstdc++'s default would only repeat the message.
#ifdef __GLIBCXX__
  const bool previous_is_default = g_previous_terminate == __gnu_cxx::__verbose_terminate_handler;
#else
  const bool previous_is_default = false;
#endif
  if (g_previous_terminate != nullptr && !previous_is_default) g_previous_terminate();
  std::abort();
}

// ---- Installation.

/// This thread's alternate signal stack, released when the thread ends.
struct AlternateStack {
  void* memory = nullptr;
  std::size_t size = 0;
  ~AlternateStack() {
    if (memory == nullptr) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    ::sigaltstack(&off, nullptr);
    ::munmap(memory, size);
  }
};
thread_local AlternateStack t_alternate_stack;

void install_alternate_stack() {
  if (t_alternate_stack.memory != nullptr) return;
  stack_t current{};
  // A stack someone else installed (a sanitizer, the program) serves as well; keep it.
  if (::sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;
  // The unwinder and backtrace_symbols_fd need more than MINSIGSTKSZ.
  const std::size_t size = std::max<std::size_t>(256 * 1024, static_cast<std::size_t>(SIGSTKSZ));
  void* memory = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (memory == MAP_FAILED) return;
  stack_t stack{};
  stack.ss_sp = memory;
  stack.ss_size = size;
  if (::sigaltstack(&stack, nullptr) != 0) {
    ::munmap(memory, size);
    return;
  }
  t_alternate_stack.memory = memory;
  t_alternate_stack.size = size;
}

void install_process_handlers() {
  g_installer_pid = ::getpid();
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path != nullptr && std::strlen(path) < kMaxPath) {
    std::strcpy(g_error_path, path);
    std::strcpy(g_error_tmp_path, path);
    std::strcat(g_error_tmp_path, ".tmp");
  }
  if (::pipe2(g_trace_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_trace_pipe[0] = g_trace_pipe[1] = -1;
  // The first backtrace() loads libgcc's unwinder, which allocates: do it now, not in a handler.
  void* warm_up[2];
  ::backtrace(warm_up, 2);

  g_previous_terminate = std::set_terminate(on_terminate);
  for (int signo : kFatalSignals) {
    struct sigaction action{};
    action.sa_sigaction = on_fatal_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(signo, &action, &g_previous_actions[signo]);
  }
}

}  // namespace

void install_error_handlers() {
  std::call_once(g_install_once, install_process_handlers);
  install_alternate_stack();
}

// Frames 0 and 1 are capture_frames and this function.
__attribute__((noinline)) std::string backtrace_text(int skip) { return numbered(capture_frames(skip + 2), 0); }

__attribute__((noinline)) void record_error(std::string_view message, std::string_view traceback) {
  if (!traceback.empty()) {
    record_report(message, traceback);
    return;
  }
  record_report(message, std::string(kReportHeader) + backtrace_text(1) + std::string(message) + "\n");
}

__attribute__((noinline)) void record_exception(const std::exception& error) {
  std::string message = demangle(typeid(error).name()) + ": " + error.what();
  std::string traceback = std::string(kReportHeader) + backtrace_text(1);
  if (const auto* ddprun_error = dynamic_cast<const Error*>(&error)) {
    traceback += "thrown at " + std::string(ddprun_error->file()) + ":" + std::to_string(ddprun_error->line()) + "\n";
  }
  record_report(message, traceback + message + "\n");
}

}  // namespace ddprun

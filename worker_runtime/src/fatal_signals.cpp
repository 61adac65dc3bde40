#include "fatal_signals.hpp"

#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "error_json.hpp"

namespace ddprun::detail {
namespace {

constexpr int kMaxFrames = 64;
constexpr std::size_t kMaxPath = 4096;
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr std::string_view kSignalHeader = "C++ backtrace at the signal (most recent call first):\n";
/// How long a report may take before SIGALRM ends the process (arm_watchdog).
constexpr unsigned kWatchdogSeconds = 10;

// ---- State the signal handler reads: fixed storage, filled in before the handlers are installed.

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

// ---- The report.

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
  finish_report();
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

void on_fatal_signal(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  arm_watchdog();
  if (!(signo == SIGABRT && g_terminate_reported.load())) report_signal(signo, info, context);
  reraise(signo);
  errno = saved_errno;
}

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

}  // namespace

void install_fatal_signal_handlers() {
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

  for (int signo : kFatalSignals) {
    struct sigaction action{};
    action.sa_sigaction = on_fatal_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(signo, &action, &g_previous_actions[signo]);
  }
}

bool is_installer_process() { return ::getpid() == g_installer_pid; }

void note_terminate_reported() { g_terminate_reported.store(true); }

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

}  // namespace ddprun::detail

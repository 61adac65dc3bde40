#include "ddprun/error_report.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <typeinfo>
#include <vector>

#include "ddprun/error.hpp"
#include "error_json.hpp"
#include "fatal_signals.hpp"

namespace ddprun {
namespace {

using detail::claim_report;
using detail::epoch_seconds;
using detail::finish_report;
using detail::write_report;

constexpr int kMaxFrames = 64;
constexpr std::string_view kThrowHeader = "C++ backtrace of the throw (most recent call first):\n";
constexpr std::string_view kReportHeader = "C++ backtrace at the report (most recent call first):\n";

std::terminate_handler g_previous_terminate = nullptr;
std::once_flag g_install_once;

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
  finish_report();
}

[[noreturn]] void on_terminate() {
  detail::note_terminate_reported();
  detail::arm_watchdog();
  std::vector<void*> frames = capture_frames(0);
  std::string location;
  std::string message = describe_current_exception(location);
  std::string traceback = std::string(kThrowHeader) + numbered(frames, throw_site_index(frames));
  if (!location.empty()) traceback += "thrown at " + location + "\n";
  traceback += message + "\n";
  std::fprintf(stderr, "ddprun: uncaught exception\n%s", traceback.c_str());
  std::fflush(stderr);
  if (detail::is_installer_process()) record_report(message, traceback);
  // A user's own terminate handler gets its turn; libstdc++'s default would only repeat the message.
#ifdef __GLIBCXX__
  const bool previous_is_default = g_previous_terminate == __gnu_cxx::__verbose_terminate_handler;
#else
  const bool previous_is_default = false;
#endif
  if (g_previous_terminate != nullptr && !previous_is_default) g_previous_terminate();
  std::abort();
}

void install_process_handlers() {
  detail::install_fatal_signal_handlers();
  g_previous_terminate = std::set_terminate(on_terminate);
}

}  // namespace

void install_error_handlers() {
  std::call_once(g_install_once, install_process_handlers);
  detail::install_alternate_stack();
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

#pragma once
/// Error reporting to the launcher: when a worker fails, it leaves the root cause in
/// TORCHELASTIC_ERROR_FILE, and ddprun's (or torchrun's) failure summary shows it.
///
/// The file, in the format PyTorch's @record writes:
///   {"message": {"message": "<Type>: <text>",
///                "extraInfo": {"py_callstack": "<traceback>", "timestamp": "<epoch seconds>"}}}
/// The traceback is a C++ backtrace, most recent call first, ending with the message line (as a
/// Python traceback does). For an uncaught exception it is the stack of the throw (an exception
/// nobody catches is not unwound; past a noexcept function, only up to that function):
///   C++ backtrace of the throw (most recent call first):
///     #0 ./trainer(load_shard(int)+0x4a) [0x55d0c2a1b2c4]
///     #1 ./trainer(main+0x1f) [0x55d0c2a1b3e0]
///     ...
///   thrown at examples/trainer.cpp:42            (ddprun::Error only)
///   ddprun::Error: shard 7 is missing
/// For a fatal signal it starts at the interrupted instruction, with "at the signal" in the first
/// line and mangled names (no demangler is async-signal-safe; c++filt reads them). The message is
/// "FatalSignal: Signal 11 (SIGSEGV) in PID 4242: Segmentation fault at address 0x0".
/// Function names need the executable's symbols exported (link with -rdynamic, CMake
/// ENABLE_EXPORTS); without them frames show as module+offset (addr2line turns those into lines).
///
/// Example:
///   int main(int argc, char** argv) {
///     ddprun::install_error_handlers();   // first thing, before starting threads
///     ...                                 // an uncaught exception or a crash is now reported
///   }
///
/// Rules:
/// - TORCHELASTIC_ERROR_FILE unset (not under a launcher): nothing is written; an automatic
///   report still goes to stderr.
/// - The first error of a process wins: a later one (the SIGABRT of the abort() that follows an
///   uncaught exception, a crash while shutting down after record_error) does not replace the
///   root cause. PyTorch overwrites instead; for a root-cause report the first failure is the
///   one to keep. A file left by an earlier process (a previous attempt) is replaced.
/// - The file is replaced atomically (written beside it, then renamed), so the launcher never
///   reads half a report. A fatal signal writes a report without the backtrace first, then the
///   full one: if the backtrace itself crashes, the short report stays.
/// - Only the process that installed the handlers writes the file from them; a fork()ed child
///   that crashes (a data-loading helper, say) reports on stderr only, since it is not the worker
///   the launcher knows.
/// - A report never turns a crash into a hang (a lock held by the code that crashed, say): the
///   handlers arm alarm(10), and SIGALRM's default action ends the process if they get stuck.
#include <exception>
#include <string>
#include <string_view>

namespace ddprun {

/// Installs the reporters, once per process (later calls only do the per-thread part):
/// - std::set_terminate: an uncaught exception is reported as "<type>: <what()>" with the
///   backtrace of the throw, on stderr and in the file; then a terminate handler the program had
///   set runs, and std::abort() follows (libstdc++'s default handler is skipped: it would only
///   repeat the message), so the worker still dies of SIGABRT.
/// - SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT (sigaction, SA_ONSTACK): the report is written with
///   async-signal-safe calls only (no allocation, write(2) and rename(2)), the backtrace goes to
///   stderr too, then the signal's previous disposition is restored and the signal re-raised, so
///   the exit status stays that signal's death.
/// - An alternate signal stack for the calling thread, so that a stack overflow is reported too.
///   Call it again from threads you start to give them one (it is released when the thread ends).
/// Reads TORCHELASTIC_ERROR_FILE now: set it before calling.
void install_error_handlers();

/// Writes the error file now, as PyTorch's @record does for a caught exception. `message` is
/// written as given (use "<Type>: <text>"); an empty `traceback` means the backtrace of this call.
/// Does nothing when TORCHELASTIC_ERROR_FILE is unset or an error was already recorded by this
/// process. Does not need install_error_handlers.
void record_error(std::string_view message, std::string_view traceback = {});

/// record_error for a caught exception: "<dynamic type>: <what()>", the backtrace of this call and,
/// for ddprun::Error, where it was thrown.
///   catch (const std::exception& e) { ddprun::record_exception(e); return 1; }
void record_exception(const std::exception& error);

/// This thread's backtrace, most recent call first, one "  #i frame" line each, names demangled;
/// `skip` more frames than this function itself are left out.
std::string backtrace_text(int skip = 0);

}  // namespace ddprun

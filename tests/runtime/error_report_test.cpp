// Error reporting with real processes: a forked child records, throws, or crashes; the parent
// checks how it died and parses TORCHELASTIC_ERROR_FILE as the launcher does (strict JSON).
// The last test runs this binary under the real ddprun and reads its failure summary.
#include "ddprun/error_report.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "ddprun/error.hpp"

namespace ddprun {

// What the child processes do: outside the anonymous namespace, so that with -rdynamic their
// names reach the backtraces the tests read.
namespace error_report_test {

__attribute__((noinline)) void throw_for_test(const char* text) { throw Error(text); }

int* volatile null_pointer = nullptr;  // volatile: the compiler cannot see the crash coming

__attribute__((noinline)) void write_through() { *null_pointer = 1; }

#pragma GCC diagnostic ignored "-Winfinite-recursion"  // the point of it
__attribute__((noinline)) int recurse_forever(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  return recurse_forever(depth + 1) + frame[0];
}

__attribute__((noinline)) std::string call_backtrace_text() { return backtrace_text(); }

}  // namespace error_report_test

namespace {

using namespace error_report_test;
using nlohmann::json;
namespace fs = std::filesystem;

/// ddprun runs this binary as its worker with DDPRUN_ERROR_REPORT_TEST_WORKER set: it fails at
/// once, before gtest starts.
const bool worker_mode = [] {
  const char* mode = std::getenv("DDPRUN_ERROR_REPORT_TEST_WORKER");
  if (mode == nullptr) return false;
  install_error_handlers();
  if (std::string(mode) == "throw") throw_for_test("thrown by the end-to-end worker");
  if (std::string(mode) == "segv") write_through();
  return true;
}();

// ---- The parent's side.

struct Child {
  int status = 0;
  std::string err;  ///< what it wrote on stderr
  bool signaled(int signo) const { return WIFSIGNALED(status) && WTERMSIG(status) == signo; }
  bool exited(int code) const { return WIFEXITED(status) && WEXITSTATUS(status) == code; }
};

/// A thread of the C library's own: an exception escaping `body` finds no handler on its stack
/// (gtest's, around the test, is on another), so it is an uncaught exception as in a real worker.
void* run_body(void* body) {
  (*static_cast<const std::function<void()>*>(body))();
  return nullptr;
}

/// Runs `body` in a forked child with TORCHELASTIC_ERROR_FILE = `error_file` (unset when empty);
/// the child exits 0 when `body` returns.
Child run_child(const std::string& error_file, const std::function<void()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe");
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    if (error_file.empty()) {
      ::unsetenv("TORCHELASTIC_ERROR_FILE");
    } else {
      ::setenv("TORCHELASTIC_ERROR_FILE", error_file.c_str(), 1);
    }
    pthread_t thread;
    if (::pthread_create(&thread, nullptr, run_body, const_cast<std::function<void()>*>(&body)) != 0) ::_exit(99);
    ::pthread_join(thread, nullptr);
    ::_exit(0);
  }
  ::close(fds[1]);
  Child child;
  char buffer[4096];
  for (ssize_t got; (got = ::read(fds[0], buffer, sizeof buffer)) > 0;) child.err.append(buffer, static_cast<std::size_t>(got));
  ::close(fds[0]);
  ::waitpid(pid, &child.status, 0);
  return child;
}

class ErrorReport : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ddprun_error_report_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = (dir_ / "error.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// The error file as the launcher would parse it (strict: invalid JSON or UTF-8 throws).
  json read_report() const {
    std::ifstream file(path_);
    EXPECT_TRUE(file.good()) << "no error file at " << path_;
    std::stringstream text;
    text << file.rdbuf();
    return json::parse(text.str());
  }
  std::string message() const { return read_report().at("message").at("message").get<std::string>(); }
  std::string traceback() const {
    return read_report().at("message").at("extraInfo").at("py_callstack").get<std::string>();
  }

  fs::path dir_;
  std::string path_;
};

bool symbols_exported() {
  Dl_info info{};
  return ::dladdr(reinterpret_cast<void*>(&throw_for_test), &info) != 0 && info.dli_sname != nullptr;
}

TEST_F(ErrorReport, RecordErrorWritesPyTorchsFormat) {
  const auto before = std::time(nullptr);
  Child child = run_child(path_, [] {
    record_error("ValueError: bad input", "Traceback (most recent call last):\n  ...\nValueError: bad input\n");
  });
  const auto after = std::time(nullptr);
  ASSERT_TRUE(child.exited(0)) << child.err;
  json report = read_report();
  ASSERT_EQ(report.size(), 1u);
  const json& inner = report.at("message");
  EXPECT_EQ(inner.size(), 2u);
  EXPECT_EQ(inner.at("message"), "ValueError: bad input");
  const json& extra = inner.at("extraInfo");
  EXPECT_EQ(extra.at("py_callstack"), "Traceback (most recent call last):\n  ...\nValueError: bad input\n");
  ASSERT_TRUE(extra.at("timestamp").is_string());  // PyTorch writes str(int(time.time()))
  const long long timestamp = std::stoll(extra.at("timestamp").get<std::string>());
  EXPECT_GE(timestamp, before);
  EXPECT_LE(timestamp, after);
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
}

TEST_F(ErrorReport, RecordErrorWithoutTracebackTakesTheCallersBacktrace) {
  Child child = run_child(path_, [] { record_error("RuntimeError: out of patience"); });
  ASSERT_TRUE(child.exited(0)) << child.err;
  std::string trace = traceback();
  EXPECT_EQ(trace.rfind("C++ backtrace at the report (most recent call first):\n  #0 ", 0), 0u) << trace;
  EXPECT_TRUE(trace.ends_with("\nRuntimeError: out of patience\n")) << trace;
  EXPECT_EQ(trace.find("record_error"), std::string::npos) << "the reporter's own frame is left out: " << trace;
}

TEST_F(ErrorReport, RecordExceptionNamesTheDynamicTypeAndTheThrowSite) {
  Child child = run_child(path_, [] {
    try {
      throw_for_test("shard 7 is missing");
    } catch (const std::exception& e) {
      record_exception(e);
    }
  });
  ASSERT_TRUE(child.exited(0)) << child.err;
  EXPECT_EQ(message(), "ddprun::Error: shard 7 is missing");
  EXPECT_NE(traceback().find("thrown at " __FILE__ ":"), std::string::npos) << traceback();
}

TEST_F(ErrorReport, FirstErrorWinsInAProcess) {
  Child child = run_child(path_, [] {
    record_error("First: the root cause", "t1");
    record_error("Second: a consequence", "t2");
    install_error_handlers();
    write_through();  // a crash while shutting down: not the root cause either
  });
  EXPECT_TRUE(child.signaled(SIGSEGV)) << child.status;
  EXPECT_EQ(message(), "First: the root cause");
  EXPECT_EQ(traceback(), "t1");
  EXPECT_NE(child.err.find("ddprun: FatalSignal: Signal 11 (SIGSEGV)"), std::string::npos) << "still on stderr: " << child.err;
}

TEST_F(ErrorReport, AFileOfAnEarlierProcessIsReplaced) {
  std::ofstream(path_) << "{\"message\": \"stale from attempt 0\"} and more than before";
  Child child = run_child(path_, [] { record_error("New: attempt 1", "t"); });
  ASSERT_TRUE(child.exited(0)) << child.err;
  EXPECT_EQ(message(), "New: attempt 1");
}

TEST_F(ErrorReport, AnythingInTheTextStaysValidJson) {
  Child child = run_child(path_, [] {
    record_error("X: quote\" backslash\\ tab\t nl\n ctl\x01 del\x7f utf8 \xc3\xa9 bad \xff\xc3 end",
                 "surrogate \xed\xa0\x80 overlong \xc0\xaf 4byte \xf0\x9f\x98\x80");
  });
  ASSERT_TRUE(child.exited(0)) << child.err;
  EXPECT_EQ(message(), "X: quote\" backslash\\ tab\t nl\n ctl\x01 del\x7f utf8 \xc3\xa9 bad \xef\xbf\xbd\xef\xbf\xbd end");
  EXPECT_EQ(traceback(),
            "surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd overlong \xef\xbf\xbd\xef\xbf\xbd 4byte \xf0\x9f\x98\x80");
}

TEST_F(ErrorReport, NothingWrittenWithoutTheVariable) {
  Child child = run_child("", [] {
    record_error("X: y", "z");
    install_error_handlers();
    throw_for_test("unreported");
  });
  EXPECT_TRUE(child.signaled(SIGABRT)) << child.status;
  EXPECT_TRUE(fs::is_empty(dir_));
  EXPECT_NE(child.err.find("ddprun::Error: unreported"), std::string::npos) << child.err;
}

TEST_F(ErrorReport, UncaughtExceptionIsReportedAndTheWorkerDiesOfSigabrt) {
  Child child = run_child(path_, [] {
    install_error_handlers();
    throw_for_test("disk on fire");
  });
  EXPECT_TRUE(child.signaled(SIGABRT)) << child.status;
  EXPECT_EQ(message(), "ddprun::Error: disk on fire");
  std::string trace = traceback();
  EXPECT_EQ(trace.rfind("C++ backtrace of the throw (most recent call first):\n  #0 ", 0), 0u) << trace;
  EXPECT_NE(trace.find("thrown at " __FILE__ ":"), std::string::npos) << trace;
  EXPECT_TRUE(trace.ends_with("\nddprun::Error: disk on fire\n")) << trace;
  if (symbols_exported()) {
    // The first frame is the thrower's, not the terminate handler's or the C++ runtime's.
    EXPECT_NE(trace.find("#0 "), std::string::npos);
    EXPECT_NE(trace.substr(0, trace.find("#1 ")).find("throw_for_test(char const*)"), std::string::npos) << trace;
  }
  EXPECT_NE(child.err.find("ddprun: uncaught exception"), std::string::npos) << child.err;
  EXPECT_NE(child.err.find("ddprun::Error: disk on fire"), std::string::npos) << child.err;
  EXPECT_EQ(child.err.find("FatalSignal"), std::string::npos) << "the abort() that follows is no news: " << child.err;
}

TEST_F(ErrorReport, ExceptionsOfOtherTypes) {
  run_child(path_, [] {
    install_error_handlers();
    throw std::out_of_range("index 9 of 3");
  });
  EXPECT_EQ(message(), "std::out_of_range: index 9 of 3");
  fs::remove(path_);
  Child child = run_child(path_, [] {
    install_error_handlers();
    throw 42;
  });
  EXPECT_TRUE(child.signaled(SIGABRT));
  EXPECT_EQ(message(), "int: (not derived from std::exception)");
  fs::remove(path_);
  run_child(path_, [] {
    install_error_handlers();
    std::terminate();
  });
  EXPECT_EQ(message(), "std::terminate: called without an active exception");
}

TEST_F(ErrorReport, UncaughtExceptionInAThread) {
  Child child = run_child(path_, [] {
    install_error_handlers();
    std::thread([] { throw std::runtime_error("worker thread failed"); }).join();
  });
  EXPECT_TRUE(child.signaled(SIGABRT)) << child.status;
  EXPECT_EQ(message(), "std::runtime_error: worker thread failed");
}

TEST_F(ErrorReport, SegfaultIsReportedAndTheWorkerDiesOfSigsegv) {
  Child child = run_child(path_, [] {
    install_error_handlers();
    write_through();
  });
  EXPECT_TRUE(child.signaled(SIGSEGV)) << child.status;
  std::string text = message();
  EXPECT_EQ(text.rfind("FatalSignal: Signal 11 (SIGSEGV) in PID ", 0), 0u) << text;
  EXPECT_TRUE(text.ends_with(": Segmentation fault at address 0x0")) << text;
  std::string trace = traceback();
  EXPECT_EQ(trace.rfind("C++ backtrace at the signal (most recent call first):\n  #0 ", 0), 0u) << trace;
  EXPECT_TRUE(trace.ends_with("\n" + text + "\n")) << trace;
  if (symbols_exported()) {
    // Frame #0 is the faulting function (mangled: no demangler is async-signal-safe).
    EXPECT_NE(trace.substr(0, trace.find("#1 ")).find("write_through"), std::string::npos) << trace;
  }
  EXPECT_NE(child.err.find("ddprun: " + text), std::string::npos) << child.err;
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
}

TEST_F(ErrorReport, EveryFatalSignalKeepsItsDeath) {
  struct Case {
    int signo;
    const char* text;
  };
  for (Case c : {Case{SIGBUS, "(SIGBUS) in PID"}, Case{SIGFPE, "(SIGFPE) in PID"}, Case{SIGILL, "(SIGILL) in PID"},
                 Case{SIGABRT, "(SIGABRT) in PID"}}) {
    fs::remove(path_);
    Child child = run_child(path_, [&] {
      install_error_handlers();
      std::raise(c.signo);
    });
    EXPECT_TRUE(child.signaled(c.signo)) << c.text << " " << child.status;
    EXPECT_NE(message().find(c.text), std::string::npos) << message();
  }
}

TEST_F(ErrorReport, IntegerDivisionByZero) {
  Child child = run_child(path_, [] {
    install_error_handlers();
    volatile int numerator = 7;  // not 1: GCC turns 1 / x into a comparison
    volatile int zero = 0;
    volatile int result = numerator / zero;
    (void)result;
  });
  EXPECT_TRUE(child.signaled(SIGFPE)) << child.status;
  EXPECT_NE(message().find("Signal 8 (SIGFPE)"), std::string::npos) << message();
}

TEST_F(ErrorReport, StackOverflowIsReportedFromTheAlternateStack) {
  Child child = run_child(path_, [] {
    install_error_handlers();
    recurse_forever(0);
  });
  EXPECT_TRUE(child.signaled(SIGSEGV)) << child.status;
  EXPECT_NE(message().find("Signal 11 (SIGSEGV)"), std::string::npos) << message();
  EXPECT_NE(traceback().find("#50 "), std::string::npos) << "the recursion's frames: " << traceback();
}

TEST_F(ErrorReport, AForkedChildOfTheWorkerDoesNotWriteTheWorkersFile) {
  Child child = run_child(path_, [] {
    install_error_handlers();
    pid_t helper = ::fork();
    if (helper == 0) write_through();
    int status = 0;
    ::waitpid(helper, &status, 0);
    ::_exit(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV ? 3 : 4);
  });
  EXPECT_TRUE(child.exited(3)) << child.status;
  EXPECT_FALSE(fs::exists(path_));
  EXPECT_NE(child.err.find("ddprun: FatalSignal: Signal 11 (SIGSEGV)"), std::string::npos) << "on stderr: " << child.err;
}

TEST_F(ErrorReport, BacktraceTextStartsAtTheCaller) {
  std::string trace = call_backtrace_text();
  EXPECT_EQ(trace.rfind("  #0 ", 0), 0u) << trace;
  if (symbols_exported()) {
    EXPECT_NE(trace.substr(0, trace.find("#1 ")).find("call_backtrace_text"), std::string::npos) << trace;
  }
}

/// The ddprun binary: $DDPRUN_BINARY, else bin/ddprun beside this test's folder in the build tree.
std::string ddprun_binary() {
  if (const char* path = std::getenv("DDPRUN_BINARY")) return path;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  fs::path candidate = self.parent_path().parent_path() / "bin" / "ddprun";
  return fs::exists(candidate) ? candidate.string() : std::string();
}

TEST_F(ErrorReport, TheLaunchersFailureSummaryShowsTheRootCause) {
  std::string ddprun = ddprun_binary();
  if (ddprun.empty()) GTEST_SKIP() << "ddprun binary not found (set DDPRUN_BINARY)";
  std::error_code ec;
  std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  std::string command = "DDPRUN_ERROR_REPORT_TEST_WORKER=throw '" + ddprun + "' --nproc-per-node=2 --log-dir '" +
                        dir_.string() + "' '" + self + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, got);
  int status = ::pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << output;
  EXPECT_NE(output.find("Root Cause (first observed failure):"), std::string::npos) << output;
  EXPECT_NE(output.find("ddprun::Error: thrown by the end-to-end worker"), std::string::npos) << output;
  EXPECT_NE(output.find("error.json"), std::string::npos) << output;
  EXPECT_NE(output.find("thrown at " __FILE__), std::string::npos) << output;
}

}  // namespace
}  // namespace ddprun

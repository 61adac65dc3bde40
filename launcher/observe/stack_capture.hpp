#pragma once
/// StackCapture: every rank's stacks, taken on the agent's loop without ever blocking it.
///
/// Per rank, two sources:
///   - Python frames, when the worker is a Python process running ddprun's sitecustomize
///     (python/sitecustomize.py: faulthandler registered for stack_dump_signal(), SIGURG, writing
///     to the rank's file). The dump is what the file grew by, once it stops growing. The signal
///     cannot end any process: SIGURG's default action is to ignore it, so a worker that did not
///     register (not Python, run with -I, -E or -S) or that exec'd since its handler was seen
///     (whose image has the default action again, even for a signal queued while execve ran)
///     drops it. It goes only to a process pinned by a pidfd that is still this process's child
///     and catches it (read through /proc after pinning): the pid comes from a status sample up
///     to 2 s old, and once that worker was reaped the kernel may have given it to another process.
///   - native frames of every thread: `ddprun-unwind PID` (unwind_main.cpp: ptrace and libunwind,
///     milliseconds a process) when it is beside ddprun, else `gdb -nx -batch -p PID` (`thread
///     apply all bt`), which prints the same form, as a child process in a process group of its
///     own, its output read through an Asio pipe (at most max_output bytes kept), SIGKILLed at
///     gdb_timeout; it dies with ddprun (PR_SET_PDEATHSIG). It starts after the rank's Python dump
///     is written (stopping the threads would stop the dump halfway). gdb needs CPU and memory
///     (loading libtorch's symbols costs ~2.5 s of a core and ~300 MB), so at most max_parallel_gdb
///     readers run at once.
/// `on_digest` is called once every rank has frames to place it in the digest (its Python frames,
/// or its native ones where it has none: so for Python workers the digest does not wait for gdb);
/// `on_done` once every source of every rank has ended. Exited children are reaped by the owner
/// (the agent reaps every child; its worker group ignores pids it does not know).
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

/// The signal ddprun's sitecustomize registers faulthandler for: SIGURG (23 on Linux), whose
/// default action is to ignore it, so that it can end no process (a real-time signal, as before
/// issue 25, ended a worker that exec'd between ddprun's look at its handlers and the signal).
/// Nothing of Python, PyTorch, gloo, NCCL or MPI uses it; the kernel sends it only to the owner
/// (F_SETOWN) of a socket that receives out-of-band data, and the Go runtime uses it to preempt
/// goroutines and tolerates extra ones. Workers read it from DDPRUN_STACKS_SIGNAL.
int stack_dump_signal();

/// Whether the "SigCgt:" line of /proc/PID/status (`status`) has `signo` caught.
bool catches_signal(std::string_view status, int signo);

/// Whether a capture sends the stack signal to a pinned process, from what /proc says of it after
/// it was pinned (`stat`: /proc/PID/stat, `status`: /proc/PID/status; empty: unreadable).
enum class StackSignalCheck {
  send,          ///< ddprun's child (`agent`), alive, catching `signo`
  gone,          ///< no such process, or a zombie
  not_ours,      ///< another parent: the worker ended and its pid went to another process
  not_catching,  ///< not a Python worker with ddprun's faulthandler (or not yet, or no more)
};
StackSignalCheck check_stack_signal(std::string_view stat, std::string_view status, pid_t agent, int signo);

struct StackTarget {
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  pid_t pid = 0;
  std::string python_stacks_file;  ///< where its faulthandler writes (DDPRUN_PYTHON_STACKS_FILE); empty: none
};

struct StackCaptureSettings {
  std::string unwinder;     ///< ddprun-unwind's path (find_unwinder); empty or missing: gdb
  std::string gdb = "gdb";  ///< a path, or a name looked up on PATH
  std::chrono::milliseconds gdb_timeout{30000};
  std::chrono::milliseconds python_timeout{2000};  ///< for faulthandler to write its dump
  std::size_t max_output = 1 << 20;                ///< per source and rank
  int max_parallel_gdb = 0;                        ///< 0: the number of cores, at least 2
  bool native = true;                              ///< false: Python frames only (no gdb)
};

/// One rank's capture: the values, and the texts as captured (for the rank's file).
struct CapturedRank {
  RankStacks stacks;
  std::string python_text;  ///< faulthandler's dump; empty: none
  std::string native_text;  ///< gdb's output; empty: none
  std::string python_note;  ///< why there are no Python frames ("not a Python worker"), empty: there are
  std::string native_note;  ///< why there are no native frames, empty: there are
};

class StackCapture {
 public:
  using Handler = std::function<void(const std::vector<CapturedRank>&)>;

  StackCapture(boost::asio::io_context& io, StackCaptureSettings settings);
  /// Kills every gdb still running; no handler is called after.
  ~StackCapture();
  StackCapture(const StackCapture&) = delete;
  StackCapture& operator=(const StackCapture&) = delete;

  /// Captures `targets`' stacks (one capture at a time: false, and nothing done, while one runs).
  bool start(std::vector<StackTarget> targets, Handler on_digest, Handler on_done);
  bool busy() const;
  /// Kills the gdb processes of the capture in progress and drops it: no handler is called.
  void cancel();

 private:
  struct Run;
  boost::asio::io_context& io_;
  StackCaptureSettings settings_;
  std::shared_ptr<Run> run_;
};

/// ddprun-unwind beside this process's executable (the build tree's bin/, an installed bin/), if there.
std::optional<std::string> find_unwinder();

/// The text of one rank's stacks file: a header (rank, host, pid, time), then the Python frames
/// and the native frames as captured, or why there are none.
std::string stack_file_text(const CapturedRank& rank, const std::string& host, double unix_time);

/// Line `line` of the file `path`, trimmed (the first MiB of the file is read); for the digest.
std::optional<std::string> read_source_line(const std::string& path, int line);

}  // namespace ddprun::launcher

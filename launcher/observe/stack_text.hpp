#pragma once
/// Stack text as values, pure: what gdb's `thread apply all bt` and Python's faulthandler print,
/// read into ThreadStack (job_status.hpp). Both readers skip what they do not understand (gdb's
/// "[New LWP ...]" chatter, source lines, a truncated tail), so a partial text gives what it holds.
#include <string_view>
#include <vector>

#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

/// gdb's `thread apply all bt` (with or without `set print frame-arguments none`): one ThreadStack
/// per "Thread N (...):" block, named "Thread N (LWP T)", frames innermost first. A frame's
/// function is gdb's name without its argument list ("c10d::Work::wait" of
/// "c10d::Work::wait(std::chrono::duration<...>) ()", "??" when unknown); its location is
/// "FILE:LINE" (debug info) or the shared object's path ("from /lib/libgloo.so.0"), else empty.
std::vector<ThreadStack> parse_gdb_backtrace(std::string_view text);

/// faulthandler's dump (`faulthandler.register(..., all_threads=True)` or `dump_traceback`): one
/// ThreadStack per "Thread 0x...", "Current thread 0x..." or "Stack" block, python = true, named
/// as faulthandler names it ("Thread 0x00007f..."), frames innermost first: function "all_reduce",
/// location "/path/distributed_c10d.py:1541". CPython lists the newest thread first, so the main
/// thread is the last one.
std::vector<ThreadStack> parse_faulthandler(std::string_view text);

/// The LWP (thread id) in a name made by parse_gdb_backtrace ("Thread 1 (LWP 3436)"); 0 when none.
long gdb_thread_lwp(const ThreadStack& thread);

}  // namespace ddprun::launcher

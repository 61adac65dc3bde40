#pragma once
/// The stack digest, pure: every rank's stacks (stack_capture) as a few lines, one per group of ranks
/// that stand at the same place, the odd rank out first:
///
///     rank 1: time.sleep(3600) <- train.py:41
///     ranks 0,2,3: all_reduce <- train.py:57
///
/// Where a rank stands is its main thread: its Python frames when they were captured (CPython lists
/// the main thread last), else its native frames (the thread whose LWP is the pid). Frames that say
/// nothing about the program are left out: for native frames libc, libpthread, the dynamic loader,
/// libstdc++/libgcc and std:: plumbing, the Python interpreter's own C frames (Py*, _Py*) and frames
/// gdb cannot name ("??"); Python frames are all kept.
///
/// The "user frame" is the innermost frame of the program itself: for Python the innermost frame
/// of a file outside the interpreter's library (not under lib/python3.*, site-packages or
/// dist-packages), shown as "train.py:41"; for native frames the innermost frame outside a shared
/// library (the executable's own). Ranks with the same user frame are one group; the line shows the
/// innermost frame that is not left out, then its callers up to the user frame (Python) or to the
/// outermost (native), with "..." for all but the first two and the last when they are more than
/// four. A Python rank that stands in its own code (a C function called there: time.sleep) shows
/// that line's source text first, when `source` can read it.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

/// The text of line `line` of the file `path`, trimmed; nothing when it cannot be read.
using SourceLineReader = std::function<std::optional<std::string>(const std::string& path, int line)>;

/// Where one rank stands: `key` groups ranks, `line` is what the digest shows after "rank N: ".
struct RankPlace {
  std::string key;
  std::string line;
};
RankPlace place_of(const RankStacks& stacks, const SourceLineReader& source = {});

/// One line per group of ranks with the same place ("rank 1: ...", "ranks 0,2-5: ..."), the
/// smallest group first (ties: the lowest rank first).
std::vector<std::string> stack_digest(const std::vector<RankStacks>& ranks, const SourceLineReader& source = {});

/// "0,2-5,7": ranks in order, runs of three or more as a range.
std::string rank_list(std::vector<int> ranks);

/// A C++ function name as the digest shows it: no template arguments, no parameter lists, no
/// "(anonymous namespace)::" ("main::{lambda(std::vector<double>&)#1}" -> "main::{lambda#1}").
std::string short_function_name(const std::string& name);

}  // namespace ddprun::launcher

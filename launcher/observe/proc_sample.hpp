#pragma once
/// A worker's process tree as /proc shows it: the CPU time and resident memory of the worker and of
/// every process below it (DataLoader workers, compilers, shells it runs), for the status monitor.
///
/// The tree is found from /proc/PID/task/TID/children (the processes each thread forked), not by a
/// scan of all of /proc, so that a sample costs a few reads per process of the job whatever else
/// the machine runs. Reading the children of every thread of a process with dozens of threads each
/// second would cost more than the rest of the sample, so each sample reads the main thread's list
/// (where nearly every fork happens) and every `kFullScanEvery`th sample all threads'; a process
/// found through another thread is kept, checked by its start time, until it is gone.
///
/// The parsers are pure (tests feed them recorded /proc text); ProcessTree does the reads, under a
/// root that a test may point at a folder laid out as /proc.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/base/unique_fd.hpp"

namespace ddprun::launcher {

/// The fields of /proc/PID/stat the monitor reads. Times in clock ticks (sysconf(_SC_CLK_TCK)).
struct ProcStat {
  pid_t pid = 0;
  char state = '?';           ///< R, S, D, Z, T, ...
  pid_t ppid = 0;
  std::uint64_t utime = 0;    ///< this process, all its threads
  std::uint64_t stime = 0;
  std::uint64_t cutime = 0;   ///< children it has waited for
  std::uint64_t cstime = 0;
  std::uint64_t starttime = 0;  ///< since boot: with the pid, names the process (pids are reused)
  std::uint64_t rss_pages = 0;  ///< field 24, the same count as statm's second field
};

/// Parses /proc/PID/stat. The command name (field 2) may hold spaces and parentheses: the fields
/// after it are found from its last ')'. Nothing for text that is not a stat line.
std::optional<ProcStat> parse_proc_stat(std::string_view text);

/// Parses /proc/PID/task/TID/children: pids separated by spaces. Junk is skipped.
std::vector<pid_t> parse_children(std::string_view text);

/// One sample of a whole tree.
struct TreeSample {
  std::uint64_t cpu_ticks = 0;  ///< utime + stime + cutime + cstime of every live process of the tree
  std::uint64_t rss_bytes = 0;  ///< summed over the tree (pages shared between them counted in each)
  int processes = 0;
  std::vector<pid_t> pids;  ///< the live processes of the tree, the root first (whose GPU memory is the worker's)
};

/// One worker's tree, sampled on demand. Not thread-safe; cheap to keep per worker (two open files).
class ProcessTree {
 public:
  static constexpr int kFullScanEvery = 10;

  /// `root`: the worker's pid (a child of this process, so its pid is not reused before it is
  /// reaped). `proc_root`: where /proc is.
  explicit ProcessTree(pid_t root, std::string proc_root = "/proc");

  /// Reads the tree now; nothing when the root itself is gone (or is a zombie: its times are final
  /// and its children already belong to someone else).
  std::optional<TreeSample> sample();

 private:
  struct Known {
    pid_t pid;
    std::uint64_t starttime;
  };
  std::optional<ProcStat> read_stat(pid_t pid);
  std::vector<pid_t> read_children(pid_t pid, pid_t tid);
  std::vector<pid_t> read_threads(pid_t pid) const;

  pid_t root_;
  std::string proc_root_;
  std::uint64_t page_size_;
  long samples_ = 0;
  std::vector<Known> off_main_;  ///< processes forked by a thread other than their parent's main thread
  // The root's stat and main-thread children files, kept open (most workers are one process: a
  // sample is then two reads); the others are opened at each sample.
  UniqueFd root_stat_;
  UniqueFd root_children_;
};

}  // namespace ddprun::launcher

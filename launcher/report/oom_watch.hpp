#pragma once
/// Whether the kernel's OOM killer struck: the kernel counts its kills per memory cgroup, and it
/// raises that count before it sends SIGKILL, so a count read after reaping a SIGKILLed worker
/// already includes that worker's kill.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::launcher {

/// Counts OOM kills in this process's memory cgroup, which its workers inherit: the "oom_kill" field
/// of cgroup v2 memory.events (which includes descendant cgroups), or of cgroup v1
/// memory.oom_control where the kernel has it (4.13+). Usage: read at attempt start, read again
/// when a worker dies of SIGKILL; a rise means the OOM killer killed something in the cgroup.
class OomWatch {
 public:
  /// Unavailable.
  OomWatch() = default;

  /// Finds this process's memory cgroup from `proc_self_cgroup` under `cgroup_root`: v2 first (this
  /// cgroup, else the nearest ancestor with the memory controller, which is the one charged), then
  /// v1 (the memory hierarchy's path, else that mount's root, which is what a container without a
  /// cgroup namespace sees as its own). Unavailable when no counter is readable.
  static OomWatch for_this_process(const std::filesystem::path& proc_self_cgroup = "/proc/self/cgroup",
                                   const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

  bool available() const;

  /// The current count; nothing when unavailable or the file can no longer be read.
  std::optional<std::uint64_t> read_kills() const;

  /// The file read (memory.events or memory.oom_control); empty when unavailable.
  const std::filesystem::path& counter_file() const;

 private:
  explicit OomWatch(std::filesystem::path counter_file);

  std::filesystem::path counter_file_;
};

/// The "oom_kill <n>" field of memory.events (v2) or memory.oom_control (v1) text.
std::optional<std::uint64_t> parse_oom_kill_count(std::string_view memory_events_text);

/// The path of the "0::/path" line of /proc/self/cgroup (cgroup v2, or the unified part of a hybrid).
std::optional<std::string> parse_cgroup_v2_path(std::string_view proc_self_cgroup_text);

/// The path of the cgroup v1 line whose controller list includes "memory" ("4:memory:/path").
std::optional<std::string> parse_cgroup_v1_memory_path(std::string_view proc_self_cgroup_text);

}  // namespace ddprun::launcher

#pragma once
/// JobCgroup: a cgroup v2 of the job's own, under ddprun's own cgroup, that ddprun joins before it
/// starts anything. Every worker, and whatever a worker starts, is born in it and cannot leave it
/// (setsid and double forks change the session and the parent, never the cgroup), so killing the
/// cgroup (cgroup.kill) leaves no process of any generation behind. Where cgroup v2 is not mounted or not
/// writable (no root, no delegation), there is no JobCgroup and the process groups, the subreaper
/// and the guardian's environment marker do the work instead.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::launcher {

/// The mount point of the cgroup v2 hierarchy, from /proc/self/mountinfo's text; nothing when none.
std::optional<std::string> cgroup2_mount_point(std::string_view mountinfo);

/// This process's cgroup v2 path ("/user.slice/..."), from /proc/self/cgroup's text ("0::<path>").
std::optional<std::string> cgroup2_path_of(std::string_view proc_cgroup);

/// SIGKILLs every process of the cgroup at `dir` (cgroup.kill, or each pid of cgroup.procs on
/// kernels before 5.14, repeated while new ones appear). Safe in a forked child: no allocation
/// beyond the path. Returns false when the cgroup could not be read.
bool kill_cgroup(const std::string& dir);

/// Removes the cgroup at `dir` once its processes are gone, waiting at most `timeout`.
bool remove_cgroup(const std::string& dir, std::chrono::milliseconds timeout);

class JobCgroup {
 public:
  /// Creates `<cgroup2 mount><ddprun's cgroup>/ddprun-<pid>`; nullptr where that is not possible.
  static std::unique_ptr<JobCgroup> create();
  /// Removes the cgroup (killing what is in it) unless this process joined it: then the guardian
  /// removes it once this process has exited.
  ~JobCgroup();
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  const std::string& dir() const { return dir_; }

  /// Moves this process into the cgroup, so that every process it forks from now on is born there:
  /// one migration for the job instead of one per worker (a migration costs up to a millisecond).
  /// Call it while the process has one thread. False when the kernel refuses.
  bool join();

  /// SIGKILLs every process in the cgroup and below it but this one, and waits until none is left
  /// (at most about half a second).
  void kill_all_but_this_process() const;

 private:
  explicit JobCgroup(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  bool joined_ = false;
};

}  // namespace ddprun::launcher

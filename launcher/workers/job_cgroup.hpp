#pragma once
/// JobCgroup: a cgroup v2 of the job's own, under ddprun's own cgroup, in which every worker is
/// created. Whatever a worker starts is born in it and cannot leave it (setsid and double forks
/// change the session and the parent, never the cgroup), so killing the cgroup (cgroup.kill) leaves
/// no process of any generation behind. ddprun itself stays outside, so it can kill the cgroup. Where cgroup v2 is not mounted or not
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
  /// Creates `<cgroup2 mount><ddprun's cgroup>/ddprun-<pid>-<random>` and opens it; nullptr where
  /// that is not possible.
  static std::unique_ptr<JobCgroup> create();
  ~JobCgroup();  ///< kills what is left in it and removes it
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  const std::string& dir() const { return dir_; }
  /// The cgroup's directory, open (close-on-exec): clone3(CLONE_INTO_CGROUP) creates a worker in it,
  /// with no migration (a migration waits for an RCU grace period: milliseconds, more under load).
  int dir_fd() const { return dir_fd_; }

 private:
  JobCgroup(std::string dir, int dir_fd) : dir_(std::move(dir)), dir_fd_(dir_fd) {}
  std::string dir_;
  int dir_fd_;
};

}  // namespace ddprun::launcher

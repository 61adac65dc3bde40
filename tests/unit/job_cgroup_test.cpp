// Finding the cgroup v2 hierarchy and ddprun's place in it, by table; and a real job cgroup where
// the machine allows one.
#include "job_cgroup.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ddprun::launcher {
namespace {

TEST(JobCgroup, FindsTheCgroup2MountPoint) {
  struct Case {
    std::string mountinfo;
    std::optional<std::string> expected;
  };
  const Case cases[] = {
      {"35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup"},
      // hybrid: v1 controllers first, the v2 tree under unified/; optional fields vary in number
      {"30 25 0:26 / /sys/fs/cgroup ro shared:4 - tmpfs tmpfs ro\n"
       "31 30 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
       "40 30 0:35 / /sys/fs/cgroup/unified rw shared:5 master:1 - cgroup2 cgroup2 rw\n",
       "/sys/fs/cgroup/unified"},
      {"40 30 0:35 / /mnt/with\\040space rw - cgroup2 none rw\n", "/mnt/with space"},
      {"31 30 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", std::nullopt},  // v1 only
      {"", std::nullopt},
      {"garbage without a separator\n", std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(cgroup2_mount_point(c.mountinfo), c.expected) << c.mountinfo;
}

TEST(JobCgroup, ReadsThisProcessesV2Path) {
  struct Case {
    std::string proc_cgroup;
    std::optional<std::string> expected;
  };
  const Case cases[] = {
      {"0::/user.slice/session-1.scope\n", "/user.slice/session-1.scope"},
      {"9:name=systemd:/\n4:memory:/job\n0::/\n", "/"},
      {"4:memory:/job\n", std::nullopt},
      {"", std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(cgroup2_path_of(c.proc_cgroup), c.expected) << c.proc_cgroup;
}

// Where a cgroup can be made: a process that joined it (and its setsid'd child) dies with kill_cgroup,
// and the cgroup is removed with the JobCgroup.
TEST(JobCgroup, KillsEverythingInItAndIsRemoved) {
  auto cgroup = JobCgroup::create();
  if (!cgroup) GTEST_SKIP() << "no writable cgroup v2 here";
  const std::string dir = cgroup->dir();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  if (child == 0) {
    JobCgroup* same = cgroup.release();  // the child only joins; the parent owns the cgroup
    if (!same->join()) ::_exit(3);
    if (::fork() == 0) {
      ::setsid();
      ::pause();
    }
    [[maybe_unused]] auto m = ::write(ready[1], "r", 1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_TRUE(kill_cgroup(dir));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  cgroup.reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// The agent's own end: it is in the cgroup itself, and kills everything else there, a setsid'd
// grandchild and a nested cgroup's process included.
TEST(JobCgroup, TheAgentKillsAllButItself) {
  auto probe = JobCgroup::create();
  if (!probe) GTEST_SKIP() << "no writable cgroup v2 here";
  const std::string probe_dir = probe->dir();
  probe.reset();
  pid_t agent = ::fork();
  if (agent == 0) {
    auto cgroup = JobCgroup::create();
    if (!cgroup || !cgroup->join()) ::_exit(3);
    int ready[2];
    if (::pipe(ready) != 0) ::_exit(4);
    pid_t worker = ::fork();
    if (worker == 0) {
      if (::fork() == 0) {  // a helper in a session of its own
        ::setsid();
        ::pause();
      }
      [[maybe_unused]] auto m = ::write(ready[1], "r", 1);
      ::pause();
      ::_exit(0);
    }
    char c = 0;
    if (::read(ready[0], &c, 1) != 1) ::_exit(5);
    cgroup->kill_all_but_this_process();
    int status = 0;
    if (::waitpid(worker, &status, 0) != worker || !WIFSIGNALED(status)) ::_exit(6);
    // Only this process is left in the cgroup now.
    std::ifstream procs(cgroup->dir() + "/cgroup.procs");
    pid_t pid = 0;
    int count = 0;
    while (procs >> pid) count += pid == ::getpid() ? 0 : 1;
    ::_exit(count == 0 ? 0 : 7);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(agent, &status, 0), agent);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The agent joined its cgroup, so removing it was left to the guardian: do it here. It is named
  // after the agent, beside the probe's (same parent).
  auto parent = std::filesystem::path(probe_dir).parent_path();
  EXPECT_TRUE(remove_cgroup((parent / ("ddprun-" + std::to_string(agent))).string(), std::chrono::milliseconds(1000)));
}

}  // namespace
}  // namespace ddprun::launcher

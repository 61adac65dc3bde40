// Finding the cgroup v2 hierarchy and ddprun's place in it, by table; and a real job cgroup where
// the machine allows one.
#include "launcher/workers/job_cgroup.hpp"
#include "launcher/workers/worker_process.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ddprun::launcher {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

/// A fresh folder, removed with everything in it when it goes.
struct TempFolder {
  std::string path;
  TempFolder() {
    char pattern[] = "/tmp/job_cgroup_test_XXXXXX";
    path = ::mkdtemp(pattern);
  }
  ~TempFolder() { std::filesystem::remove_all(path); }
};

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

// Where a cgroup can be made: a worker created in it (and its setsid'd child, in a session of its
// own) dies with kill_cgroup, and the cgroup is removed with the JobCgroup.
TEST(JobCgroup, AWorkerCreatedInItDiesWithItWhateverItStarted) {
  auto cgroup = JobCgroup::create();
  if (!cgroup) GTEST_SKIP() << "no writable cgroup v2 here";
  const std::string dir = cgroup->dir();
  TempFolder folder;
  WorkerSpec spec;
  spec.executable = "/bin/sh";
  spec.argv = {"sh", "-c", "setsid sleep 1000 & echo $! > " + folder.path + "/helper; echo ready; exec sleep 1000"};
  SpawnSettings settings;
  settings.cgroup_fd = cgroup->dir_fd();
  SpawnedWorker worker = spawn_worker(spec, {{"PATH", "/usr/bin:/bin"}}, settings);
  char buffer[16] = {};
  ASSERT_GT(::read(worker.stdout_fd, buffer, sizeof buffer), 0);  // "ready": the helper runs
  pid_t helper = std::stoi(read_text(folder.path + "/helper"));
  EXPECT_NE(read_text("/proc/" + std::to_string(helper) + "/cgroup").find(dir.substr(dir.rfind('/'))),
            std::string::npos)
      << "the setsid'd helper is in the job's cgroup";
  EXPECT_TRUE(kill_cgroup(dir));
  int status = 0;
  ASSERT_EQ(::waitpid(worker.pid, &status, 0), worker.pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ::close(worker.stdout_fd);
  ::close(worker.stderr_fd);
  cgroup.reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_TRUE(read_text("/proc/" + std::to_string(helper) + "/stat").empty() ||
              read_text("/proc/" + std::to_string(helper) + "/stat").find(") Z") != std::string::npos);
}

// The folder is the job's, not the pid's: ddprun in a PID namespace of its own has the pid of
// another job's ddprun (2, say) under the same parent cgroup, and that job's guardian sweeps its
// folder by name. A second cgroup of the same pid is a folder of its own.
TEST(JobCgroup, TwoJobsOfTheSamePidGetFoldersOfTheirOwn) {
  auto first = JobCgroup::create();
  if (!first) GTEST_SKIP() << "no writable cgroup v2 here";
  auto second = JobCgroup::create();
  ASSERT_NE(second, nullptr) << "the second job of pid " << ::getpid() << " got no cgroup: " << first->dir() << " is taken";
  EXPECT_NE(first->dir(), second->dir());
  const std::string name = first->dir().substr(first->dir().rfind('/') + 1);
  EXPECT_TRUE(name.starts_with("ddprun-" + std::to_string(::getpid()) + "-")) << name;
}

// A cgroup removed from outside (by an administrator, or another job's sweep) fails the start with
// a line naming the job's cgroup, not clone3's bare "No such file or directory".
TEST(JobCgroup, AStartIntoACgroupRemovedFromOutsideNamesTheCgroup) {
  auto cgroup = JobCgroup::create();
  if (!cgroup) GTEST_SKIP() << "no writable cgroup v2 here";
  ASSERT_EQ(::rmdir(cgroup->dir().c_str()), 0);
  WorkerSpec spec;
  spec.executable = "/bin/true";
  SpawnSettings settings;
  settings.cgroup_fd = cgroup->dir_fd();
  try {
    SpawnedWorker worker = spawn_worker(spec, {{"PATH", "/usr/bin:/bin"}}, settings);
    ::waitpid(worker.pid, nullptr, 0);
    ADD_FAILURE() << "a worker started in a removed cgroup";
  } catch (const std::exception& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("cannot start worker 0 (/bin/true): the job's cgroup " + cgroup->dir() + " was removed"),
              std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace ddprun::launcher

// spawn_worker's side of --numa-binding: a worker with cpu_affinity runs on exactly those CPUs
// (as /proc says), and one the kernel refuses to bind fails its start with one line that names
// the CPUs and the kernel's reason, never as an internal error.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/base/errors.hpp"
#include "launcher/workers/worker_process.hpp"

namespace ddprun::launcher {
namespace {

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return text;
}

WorkerSpec grep_own_affinity() {
  WorkerSpec spec;
  spec.executable = "/bin/grep";
  spec.argv = {"grep", "Cpus_allowed_list", "/proc/self/status"};
  return spec;
}

TEST(WorkerCpuBinding, TheWorkerRunsOnTheGivenCpus) {
  cpu_set_t own;
  CPU_ZERO(&own);
  ASSERT_EQ(::sched_getaffinity(0, sizeof own, &own), 0);
  int last = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &own)) last = cpu;
  }
  WorkerSpec spec = grep_own_affinity();
  spec.cpu_affinity = {last};
  SpawnedWorker worker = spawn_worker(spec, Environ{});
  std::string out = read_all(worker.stdout_fd);
  ::close(worker.stderr_fd);
  int status = 0;
  ASSERT_EQ(::waitpid(worker.pid, &status, 0), worker.pid);
  EXPECT_EQ(out, "Cpus_allowed_list:\t" + std::to_string(last) + "\n");
}

TEST(WorkerCpuBinding, ACpuTheKernelRefusesFailsTheStartInOneLine) {
  WorkerSpec spec = grep_own_affinity();
  spec.local_rank = 3;
  spec.cpu_affinity = {8190, 8191};  // no machine this runs on has them online
  try {
    spawn_worker(spec, Environ{});
    FAIL() << "started";
  } catch (const LaunchError& e) {
    EXPECT_STREQ(e.what(), "cannot start worker 3 (/bin/grep): --numa-binding: cannot bind it to CPUs 8190-8191: "
                           "Invalid argument (CPUs offline, or outside this cgroup's cpuset?)");
  }
}

}  // namespace
}  // namespace ddprun::launcher

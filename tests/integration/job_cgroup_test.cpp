// The job cgroup belongs to one job. Two jobs whose ddprun has the same pid (each in a PID
// namespace of its own, as in containers that share a cgroup, or in the tests that run ddprun under
// `unshare -p`) live side by side under the same parent cgroup; a job's guardian sweeps its cgroup
// after its ddprun has gone, and must find only its own job there. Real processes, real namespaces.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

std::string comm_of(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(file, name);
  return name;
}

/// The live process named `comm` whose command line holds `unique`; 0 when there is none.
pid_t find_process(const std::string& unique, const std::string& comm) {
  for (pid_t pid : processes_with_argument(unique)) {
    if (comm_of(pid) == comm && process_alive(pid)) return pid;
  }
  return 0;
}

/// The cgroup v2 path of `pid` ("/ddprun-2..."), from /proc/PID/cgroup.
std::string cgroup_of(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/cgroup");
  for (std::string line; std::getline(file, line);) {
    if (line.starts_with("0::")) return line.substr(3);
  }
  return {};
}

/// ddprun in a PID namespace of its own, as its pid 2 (the shell is pid 1 and stays after ddprun,
/// as an init that reaps, so that a guardian may outlive its ddprun there), running `/bin/sleep unique`.
Launch::Command job_in_a_pid_namespace(const std::string& unique) {
  return Launch::Command{{"/usr/bin/unshare", "-p", "-f", "--kill-child", "--mount-proc", "/bin/sh", "-c",
                          ddprun_binary() + " --standalone --nproc-per-node 1 /bin/sleep " + unique +
                              "; echo ddprun exited $?; sleep 120"}};
}

// Job A ends while its guardian is held (SIGSTOP: the guardian of a loaded machine, late to run);
// job B then starts with the same pid. When A's guardian sweeps, B's worker must live on. It was
// SIGKILLed, because both cgroups were named ddprun-2; had B's first worker not been started yet,
// B failed with "cannot start worker 0 (/bin/sleep): No such file or directory" (the cgroup gone).
TEST(JobCgroup, AnotherJobsGuardianLeavesAJobOfTheSamePidAlone) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for PID namespaces (unshare -p)";
  const std::string unique_a = "1201.25", unique_b = "1202.25";  // sleep's arguments, to find each job
  Launch a(job_in_a_pid_namespace(unique_a));
  pid_t worker_a = 0;
  ASSERT_TRUE(eventually([&] { return (worker_a = find_process(unique_a, "sleep")) != 0; }, std::chrono::seconds(30)))
      << "job A did not start";
  if (cgroup_of(worker_a).find("/ddprun-") == std::string::npos) GTEST_SKIP() << "no job cgroup here (cgroup v2 not writable)";
  const pid_t ddprun_a = find_process(unique_a, "ddprun");
  const pid_t guardian_a = find_process(unique_a, "ddprun-guardian");
  ASSERT_GT(ddprun_a, 0);
  ASSERT_GT(guardian_a, 0);
  ASSERT_EQ(::kill(guardian_a, SIGSTOP), 0);
  ASSERT_EQ(::kill(ddprun_a, SIGTERM), 0);
  ASSERT_TRUE(eventually([&] { return !process_alive(ddprun_a); }, std::chrono::seconds(30))) << "job A did not end";

  Launch b(job_in_a_pid_namespace(unique_b));
  pid_t worker_b = 0;
  ASSERT_TRUE(eventually([&] { return (worker_b = find_process(unique_b, "sleep")) != 0; }, std::chrono::seconds(30)))
      << "job B did not start";
  const std::string cgroup_b = cgroup_of(worker_b);
  EXPECT_NE(cgroup_b.find("/ddprun-"), std::string::npos) << "job B has a cgroup of its own: " << cgroup_b;

  ::kill(guardian_a, SIGCONT);
  ASSERT_TRUE(eventually([&] { return !process_alive(guardian_a); }, std::chrono::seconds(30))) << "A's guardian stays";
  EXPECT_TRUE(process_alive(worker_b)) << "A's guardian killed job B's worker";
  EXPECT_EQ(cgroup_of(worker_b), cgroup_b);

  const pid_t ddprun_b = find_process(unique_b, "ddprun");
  ASSERT_GT(ddprun_b, 0) << "job B ended early";
  ::kill(ddprun_b, SIGTERM);
  ASSERT_TRUE(eventually([&] { return !process_alive(ddprun_b); }, std::chrono::seconds(30)));
  b.send(SIGKILL);  // the namespace's shell, which sleeps on; --kill-child ends the namespace with it
  Outcome outcome = b.wait(std::chrono::seconds(30));
  EXPECT_NE(outcome.err.find("received SIGTERM, workers stopped"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.out.find("ddprun exited 143"), std::string::npos) << outcome.out << outcome.err;
}

}  // namespace

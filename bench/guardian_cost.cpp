/// guardian_cost [RUNS]: what the no-orphans machinery adds to a launch, measured in process so that
/// a busy machine's noise (a launch takes tens of ms there) does not hide it. Per run:
///   guardian  Guardian::start (the fork) and the goodbye, as the agent pays them (the guardian
///             exits and is reaped on its own, off the agent's path)
///   cgroup    JobCgroup::create and its removal; and per worker, a fork against a clone3 into the
///             cgroup (how workers are created in it)
/// Prints the medians in microseconds.
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "launcher/workers/guardian.hpp"
#include "launcher/workers/job_cgroup.hpp"

using namespace ddprun::launcher;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs.empty() ? 0.0 : xs[xs.size() / 2];
}

double micros_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

/// One child forked and reaped, or cloned into `cgroup_fd` (clone3 CLONE_INTO_CGROUP), as a worker is.
double spawn_and_reap(int cgroup_fd) {
  auto t0 = Clock::now();
  pid_t pid = -1;
  if (cgroup_fd >= 0) {
    clone_args args{};
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
    pid = static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
  } else {
    pid = ::fork();
  }
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return micros_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 200;
  std::vector<double> guardian, cgroup, forked, cloned;
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    auto started = Guardian::start("", new_guardian_marker());
    started->mark_clean();
    const pid_t pid = started->pid();
    started.reset();
    guardian.push_back(micros_since(t0));
    ::kill(pid, SIGKILL);  // its pipe stays open with this process: end it as the agent's exit would
    ::waitpid(pid, nullptr, 0);  // init's job after a real agent exits
    t0 = Clock::now();
    auto job = JobCgroup::create();
    if (!job) continue;
    double made = micros_since(t0);
    forked.push_back(spawn_and_reap(-1));
    cloned.push_back(spawn_and_reap(job->dir_fd()));
    t0 = Clock::now();
    job.reset();
    cgroup.push_back(made + micros_since(t0));
  }
  std::printf("guardian_cost  guardian %.0f us  job cgroup (make+remove) %s  per worker: fork %s, clone3 into the cgroup %s  (medians of %d runs)\n",
              median(guardian), cgroup.empty() ? "n/a" : (std::to_string(static_cast<int>(median(cgroup))) + " us").c_str(),
              forked.empty() ? "n/a" : (std::to_string(static_cast<int>(median(forked))) + " us").c_str(),
              cloned.empty() ? "n/a" : (std::to_string(static_cast<int>(median(cloned))) + " us").c_str(), runs);
  return 0;
}

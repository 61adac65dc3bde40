/// guardian_cost [RUNS]: what the no-orphans machinery adds to a launch, measured in process so that
/// a busy machine's noise (a launch takes tens of ms there) does not hide it. Per run:
///   guardian  Guardian::start (the fork) and the goodbye, as the agent pays them (the guardian
///             exits and is reaped on its own, off the agent's path)
///   cgroup    JobCgroup::create and join (the agent moving itself in), in a fresh child process
/// Prints the medians in microseconds.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "guardian.hpp"
#include "job_cgroup.hpp"

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

/// create + join in a child (joining moves the whole process); -1 where no cgroup can be made.
double cgroup_create_and_join() {
  int report[2];
  if (::pipe(report) != 0) return -1;
  pid_t child = ::fork();
  if (child == 0) {
    auto t0 = Clock::now();
    auto cgroup = JobCgroup::create();
    double us = cgroup && cgroup->join() ? micros_since(t0) : -1;
    [[maybe_unused]] auto n = ::write(report[1], &us, sizeof us);
    std::string dir = cgroup ? cgroup->dir() : std::string();
    [[maybe_unused]] auto m = ::write(report[1], dir.c_str(), dir.size() + 1);
    ::_exit(0);
  }
  ::close(report[1]);
  double us = -1;
  char dir[4096] = {};
  if (::read(report[0], &us, sizeof us) != sizeof us) us = -1;
  [[maybe_unused]] auto n = ::read(report[0], dir, sizeof dir - 1);
  ::close(report[0]);
  ::waitpid(child, nullptr, 0);
  if (dir[0] != '\0') remove_cgroup(dir, std::chrono::milliseconds(1000));
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 200;
  std::vector<double> guardian, cgroup;
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    auto started = Guardian::start("", new_guardian_marker());
    started->mark_clean();
    const pid_t pid = started->pid();
    started.reset();
    guardian.push_back(micros_since(t0));
    ::kill(pid, SIGKILL);  // its pipe stays open with this process: end it as the agent's exit would
    ::waitpid(pid, nullptr, 0);  // init's job after a real agent exits
    if (double us = cgroup_create_and_join(); us >= 0) cgroup.push_back(us);
  }
  std::printf("guardian_cost  guardian %.0f us  cgroup create+join %s  (medians of %d runs)\n", median(guardian),
              cgroup.empty() ? "n/a" : (std::to_string(static_cast<int>(median(cgroup))) + " us").c_str(), runs);
  return 0;
}

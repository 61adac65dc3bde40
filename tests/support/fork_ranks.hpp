#pragma once
/// fork_ranks(): the multi-process skeleton of the runtime's and ddprun::torch's tests. Each rank is
/// a forked child (the test process stays single-threaded, so forking it is safe).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace ddprun::testing {

/// Forks one child per rank that exits with `body(rank)` (an exception escaping it is printed and
/// exits 1), waits for all of them until `limit` has passed, SIGKILLs the ones still running, and
/// returns each rank's exit status: -1 for a rank that died of a signal or was killed at the limit.
inline std::vector<int> fork_ranks(int world, const std::function<int(int rank)>& body,
                                   std::chrono::seconds limit) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int status = 1;
      try {
        status = body(rank);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "rank %d: %s\n", rank, error.what());
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(status);
    }
    pids.push_back(pid);
  }
  std::vector<int> statuses;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    statuses.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return statuses;
}

/// How many of `statuses` are not a clean exit 0.
inline int count_failed(const std::vector<int>& statuses) {
  int failed = 0;
  for (int status : statuses) failed += status == 0 ? 0 : 1;
  return failed;
}

}  // namespace ddprun::testing

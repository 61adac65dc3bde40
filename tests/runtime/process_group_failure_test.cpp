// What ranks see when a peer fails them: one that never joins a collective, one that never joins
// the group, one SIGKILLed in the middle of a collective. Real processes and loopback sockets; each
// rank checks the error it got (type, and that the message names the operation and the peer) and
// reports through its exit status. Elapsed times are only bounded loosely, to tell "failed within
// the timeout" from "hung": timing itself is the benchmarks' business.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/error.hpp"
#include "ddprun/process_group.hpp"
#include "../support/fork_ranks.hpp"
#include "../support/free_port.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ddprun::ProcessGroup;

using ddprun::testing::free_port;

ddprun::Identity identity_of(int rank, int world, int port) {
  ddprun::Identity identity;
  identity.rank = rank;
  identity.world_size = world;
  identity.local_rank = rank;
  identity.local_world_size = world;
  identity.master_addr = "127.0.0.1";
  identity.master_port = port;
  identity.agent_store = false;  // rank 0 hosts the store
  return identity;
}

std::unique_ptr<ProcessGroup> join(int rank, int world, int port, std::chrono::milliseconds timeout) {
  ddprun::ProcessGroupOptions options;
  options.backend = ddprun::Backend::gloo;
  options.timeout = timeout;
  return ProcessGroup::create(identity_of(rank, world, port), options);
}

/// Forks one process per rank running `body(rank, port)` (which returns its exit status, 0 = its
/// checks passed) and returns the exit statuses; -1 for a rank ended by a signal or killed at the
/// deadline.
std::vector<int> run_ranks(int world, const std::function<int(int rank, int port)>& body) {
  const int port = free_port();
  return ddprun::testing::fork_ranks(world, [&](int rank) { return body(rank, port); }, 120s);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// 0 when `message` contains every part; prints what is missing otherwise. Prints the message either
/// way: the test's log then shows what users would read.
int expect_message(int rank, const std::string& message, const std::vector<std::string>& parts) {
  std::fprintf(stderr, "rank %d got: %s\n", rank, message.c_str());
  int missing = 0;
  for (const auto& part : parts) {
    if (!contains(message, part)) {
      std::fprintf(stderr, "rank %d: the error does not mention \"%s\": %s\n", rank, part.c_str(), message.c_str());
      ++missing;
    }
  }
  return missing == 0 ? 0 : 1;
}

TEST(ProcessGroupFailure, APeerThatNeverJoinsACollectiveGivesATimeoutNamingTheOperationAndThePeer) {
  auto statuses = run_ranks(2, [](int rank, int port) {
    auto group = join(rank, 2, port, 2s);
    std::vector<float> values(1024, 1.0f);
    if (rank == 1) {
      std::this_thread::sleep_for(8s);  // alive, connected, but never calls all_reduce
      return 0;
    }
    const auto start = Clock::now();
    try {
      group->all_reduce(ddprun::buffer_of(values.data(), values.size()));
      std::fprintf(stderr, "rank 0: all_reduce succeeded without its peer\n");
      return 1;
    } catch (const ddprun::TimeoutError& error) {
      const auto waited = Clock::now() - start;
      int status = expect_message(0, error.what(), {"all_reduce", "float32 x 1024", "timed out", "rank 1"});
      if (waited > 30s) {
        std::fprintf(stderr, "rank 0: the 2 s timeout took %lld s\n",
                     static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(waited).count()));
        status = 1;
      }
      // The group is now unusable, and says why at once.
      try {
        group->barrier();
        std::fprintf(stderr, "rank 0: a barrier after the failure succeeded\n");
        return 1;
      } catch (const ddprun::Error& later) {
        status |= expect_message(0, later.what(), {"barrier", "failed earlier", "all_reduce"});
      }
      return status;
    }
  });
  EXPECT_EQ(statuses, (std::vector<int>{0, 0}));
}

TEST(ProcessGroupFailure, WaitWithItsOwnTimeoutGivesUpWhileTheOperationGoesOn) {
  auto statuses = run_ranks(2, [](int rank, int port) {
    auto group = join(rank, 2, port, 30s);
    std::vector<std::int64_t> values(10, rank + 1);
    if (rank == 1) std::this_thread::sleep_for(2s);  // late, but within the group's timeout
    auto work = group->all_reduce_async(ddprun::buffer_of(values.data(), values.size()), ddprun::ReduceOp::sum);
    int status = 0;
    if (rank == 0) {
      try {
        work->wait(100ms);
        std::fprintf(stderr, "rank 0: wait(100 ms) returned although rank 1 is 2 s late\n");
        status = 1;
      } catch (const ddprun::TimeoutError& error) {
        status |= expect_message(0, error.what(), {"all_reduce", "has not ended"});
      }
    }
    work->wait();
    if (!work->completed() || values[0] != 3) {
      std::fprintf(stderr, "rank %d: the all_reduce gave %lld, not 3\n", rank, static_cast<long long>(values[0]));
      status = 1;
    }
    return status;
  });
  EXPECT_EQ(statuses, (std::vector<int>{0, 0}));
}

TEST(ProcessGroupFailure, ARankThatNeverStartsMakesJoiningTimeOut) {
  auto statuses = run_ranks(3, [](int rank, int port) {
    if (rank == 2) return 0;  // never joins
    try {
      join(rank, 3, port, 2s);
      std::fprintf(stderr, "rank %d: joined a group of 3 with 2 ranks\n", rank);
      return 1;
    } catch (const ddprun::TimeoutError& error) {
      return expect_message(rank, error.what(), {"rank " + std::to_string(rank) + " of 3", "join"});
    }
  });
  EXPECT_EQ(statuses, (std::vector<int>{0, 0, 0}));
}

/// Rank 2 of 3 dies (SIGKILL), after starting the survivors' next all_reduce of `count` floats or
/// before; the group timeout is long, so the survivors must fail because the connection broke, not
/// because they waited it out.
void expect_survivors_fail_when_rank_2_dies(std::size_t count, bool starts_the_collective) {
  auto statuses = run_ranks(3, [=](int rank, int port) {
    auto group = join(rank, 3, port, 60s);
    std::vector<float> values(count, 1.0f);
    auto buffer = ddprun::buffer_of(values.data(), values.size());
    group->all_reduce(buffer);  // one that succeeds first
    if (rank == 2) {
      if (starts_the_collective) {
        auto work = group->all_reduce_async(buffer, ddprun::ReduceOp::sum);
        std::this_thread::sleep_for(50ms);
      }
      ::raise(SIGKILL);
    }
    const auto start = Clock::now();
    try {
      group->all_reduce(buffer);
      std::fprintf(stderr, "rank %d: all_reduce succeeded although rank 2 died\n", rank);
      return 1;
    } catch (const ddprun::TimeoutError& error) {
      std::fprintf(stderr, "rank %d: a timeout, not the broken connection: %s\n", rank, error.what());
      return 1;
    } catch (const ddprun::Error& error) {
      // Rank 1 receives from rank 2 in gloo's ring and must name it; rank 0 may learn of the death
      // second hand, from rank 1 giving up and closing its connections, and names whom it lost.
      int status = expect_message(rank, error.what(),
                                  {"all_reduce", "rank " + std::to_string(rank) + " of 3",
                                   rank == 1 ? "connection to rank 2" : "connection to rank"});
      if (Clock::now() - start > 30s) {
        std::fprintf(stderr, "rank %d: took longer than half the group's timeout\n", rank);
        status = 1;
      }
      return status;
    }
  });
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[0], 0);
  EXPECT_EQ(statuses[1], 0);
  EXPECT_EQ(statuses[2], -1);  // SIGKILLed
}

TEST(ProcessGroupFailure, APeerKilledMidCollectiveFailsTheOthersWellBeforeTheTimeout) {
  expect_survivors_fail_when_rank_2_dies(16 << 20, true);  // 64 MiB: gloo's ring, surely in flight
}

TEST(ProcessGroupFailure, APeerDeadBeforeASmallCollectiveFailsTheOthersToo) {
  // 4 KiB takes the direct exchange, which would complete if the victim had sent its part already.
  expect_survivors_fail_when_rank_2_dies(1024, false);
}

/// True once `pid` is stopped (SIGSTOP): its state in /proc/<pid>/stat is 'T'.
bool is_stopped(pid_t pid) {
  std::FILE* file = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (file == nullptr) return false;
  char line[512] = {};
  const bool read = std::fgets(line, sizeof line, file) != nullptr;
  std::fclose(file);
  const char* end_of_name = read ? std::strrchr(line, ')') : nullptr;  // "pid (name) S ..."
  return end_of_name != nullptr && end_of_name[1] == ' ' && end_of_name[2] == 'T';
}

/// Rank 2 of 3 posts its side of a 256 MiB broadcast and stops (SIGSTOP), so that a survivor's
/// transfer with it stands half done inside gloo's socket I/O, where gloo does not fail it when the
/// connection breaks; then rank 2 is SIGKILLed. `victim_is_root`: rank 2 sends (the survivors are
/// mid-receive); otherwise rank 0 sends to it (rank 0 is mid-send; rank 1 gets its copy and fails
/// at its next operation). With a 20 s group timeout, a survivor stuck in gloo's I/O would wait
/// it out: each must fail with an error naming the operation and rank 2, well before.
void expect_survivors_fail_when_a_stopped_rank_2_is_killed(bool victim_is_root) {
  int pid_pipe[2];
  ASSERT_EQ(::pipe(pid_pipe), 0);
  auto statuses = run_ranks(3, [=](int rank, int port) {
    auto group = join(rank, 3, port, 20s);
    std::vector<float> values(64 << 20, 1.0f);  // 256 MiB: far more than the sockets buffer
    auto buffer = ddprun::buffer_of(values.data(), values.size());
    const int root = victim_is_root ? 2 : 0;
    group->barrier();
    if (rank == 2) {
      const pid_t self = ::getpid();
      if (victim_is_root) {
        std::this_thread::sleep_for(500ms);  // the survivors' receives are posted
        auto work = group->broadcast_async(buffer, root);
        std::this_thread::sleep_for(20ms);  // some of the data is out, most is not
        for (int rank_told = 0; rank_told < 2; ++rank_told) (void)!::write(pid_pipe[1], &self, sizeof self);
        ::raise(SIGSTOP);
      } else {
        auto work = group->broadcast_async(buffer, root);
        std::this_thread::sleep_for(500ms);  // its receive is posted: rank 0's send starts at once
        for (int rank_told = 0; rank_told < 2; ++rank_told) (void)!::write(pid_pipe[1], &self, sizeof self);
        ::raise(SIGSTOP);
      }
      return 0;  // never reached: SIGKILLed while stopped
    }
    std::shared_ptr<ddprun::Work> work;
    if (victim_is_root) work = group->broadcast_async(buffer, root);
    pid_t victim = 0;
    if (::read(pid_pipe[0], &victim, sizeof victim) != sizeof victim) return 2;
    while (!is_stopped(victim)) std::this_thread::sleep_for(5ms);
    if (!victim_is_root) work = group->broadcast_async(buffer, root);
    std::this_thread::sleep_for(300ms);  // rank 0 writes into rank 2's full socket
    if (rank == 0) ::kill(victim, SIGKILL);  // rank 1 may find it already gone: both are fine
    const auto start = Clock::now();
    std::string operation = "broadcast";
    try {
      work->wait();
      // Rank 1's copy comes from rank 0 when rank 0 is the root: its next operation must fail.
      if (victim_is_root || rank == 0) {
        std::fprintf(stderr, "rank %d: the broadcast succeeded although rank 2 died\n", rank);
        return 1;
      }
      operation = "barrier";
      group->barrier();
      std::fprintf(stderr, "rank %d: a barrier succeeded although rank 2 died\n", rank);
      return 1;
    } catch (const ddprun::TimeoutError& error) {
      std::fprintf(stderr, "rank %d: waited out the timeout, not told of the broken connection: %s\n", rank,
                   error.what());
      return 1;
    } catch (const ddprun::Error& error) {
      // A rank that learns of the death second hand (rank 0 giving up) names whom it lost.
      const bool first_hand = victim_is_root || rank == 0;
      int status = expect_message(rank, error.what(),
                                  {operation, "rank " + std::to_string(rank) + " of 3",
                                   first_hand ? "connection to rank 2" : "connection to rank"});
      if (Clock::now() - start > 10s) {
        std::fprintf(stderr, "rank %d: took longer than half the group's timeout\n", rank);
        status = 1;
      }
      return status;
    }
  });
  ::close(pid_pipe[0]);
  ::close(pid_pipe[1]);
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[0], 0);
  EXPECT_EQ(statuses[1], 0);
  EXPECT_EQ(statuses[2], -1);  // SIGKILLed
}

TEST(ProcessGroupFailure, APeerKilledWhileASurvivorIsMidSendFailsTheSurvivorAtOnce) {
  expect_survivors_fail_when_a_stopped_rank_2_is_killed(false);
}

TEST(ProcessGroupFailure, APeerKilledWhileTheSurvivorsAreMidReceiveFailsThemAtOnce) {
  expect_survivors_fail_when_a_stopped_rank_2_is_killed(true);
}

TEST(ProcessGroupFailure, NcclWithoutAGpuIsAClearErrorNotACrash) {
  auto statuses = run_ranks(1, [](int rank, int port) {
    ddprun::ProcessGroupOptions options;
    options.backend = ddprun::Backend::nccl;
    options.timeout = 5s;
    try {
      auto group = ProcessGroup::create(identity_of(rank, 1, port), options);
      return group->backend() == ddprun::Backend::nccl ? 0 : 1;  // a worker with a GPU
    } catch (const ddprun::Error& error) {
      return expect_message(rank, error.what(), {"nccl backend needs"});
    }
  });
  EXPECT_EQ(statuses, (std::vector<int>{0}));
}

}  // namespace

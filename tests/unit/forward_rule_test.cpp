// decide_forward by table: only slurmstepd's signal to workers in ddprun's own cgroup is held back.
#include "forward_rule.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

namespace ddprun::launcher {
namespace {

struct Case {
  const char* name;
  SignalOrigin origin;
  const char* sender_name;
  bool shared_cgroup;
  ForwardVerdict expected;
};

TEST(DecideForward, Table) {
  constexpr auto forward = ForwardVerdict::forward;
  constexpr auto hold = ForwardVerdict::sender_signals_workers_too;
  const Case cases[] = {
      {"user's kill", {SIGUSR1, SI_USER, 4242}, "bash", true, forward},
      {"slurmstepd, workers in its cgroup", {SIGUSR1, SI_USER, 77}, "slurmstepd", true, hold},
      {"slurmstepd via sigqueue", {SIGUSR2, SI_QUEUE, 77}, "slurmstepd", true, hold},
      {"slurmstepd, workers in ddprun's job cgroup", {SIGUSR1, SI_USER, 77}, "slurmstepd", false, forward},
      {"sender gone: name unknown", {SIGUSR1, SI_USER, 77}, "", true, forward},
      {"kernel-sent", {SIGUSR1, SI_KERNEL, 0}, "slurmstepd", true, forward},
      {"a name that only starts alike", {SIGUSR1, SI_USER, 77}, "slurmstepd2", true, forward},
      {"srun itself (not slurmstepd)", {SIGUSR1, SI_USER, 77}, "srun", true, forward},
  };
  for (const auto& c : cases) EXPECT_EQ(decide_forward(c.origin, c.sender_name, c.shared_cgroup), c.expected) << c.name;
}

TEST(ProcessName, NamesThisProcessAndNothingForAGonePid) {
  EXPECT_EQ(process_name(::getpid()), "unit_forward_ru");  // comm keeps 15 characters
  EXPECT_EQ(process_name(0x3fffffff), "");
}

}  // namespace
}  // namespace ddprun::launcher

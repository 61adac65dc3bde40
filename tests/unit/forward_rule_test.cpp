// decide_forward by table: only slurmstepd's signal to workers in ddprun's own cgroup is held back.
#include "launcher/forward_rule.hpp"

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

TEST(InSlurmV1Step, Table) {
  EXPECT_FALSE(in_slurm_v1_step("0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n"));  // v2: no freezer
  EXPECT_FALSE(in_slurm_v1_step(""));
  EXPECT_TRUE(in_slurm_v1_step("12:freezer:/slurm/uid_1000/job_42/step_0\n0::/\n"));  // hybrid, Slurm on v1
  EXPECT_TRUE(in_slurm_v1_step("4:cpu,freezer,cpuacct:/slurm/uid_0/job_7/step_batch\n"));
  EXPECT_FALSE(in_slurm_v1_step("6:freezer:/\n0::/\n"));  // a freezer hierarchy, but no Slurm step
  EXPECT_FALSE(in_slurm_v1_step("4:memory:/slurm/uid_0/job_7/step_0\n6:freezer:/\n"));
  EXPECT_FALSE(in_slurm_v1_step("5:freezerish:/slurm/uid_0/job_7/step_0\n"));
  EXPECT_FALSE(in_slurm_v1_step("garbage"));
}

TEST(ProcessName, NamesThisProcessAndNothingForAGonePid) {
  EXPECT_EQ(process_name(::getpid()), "unit_forward_ru");  // comm keeps 15 characters
  EXPECT_EQ(process_name(0x3fffffff), "");
}

}  // namespace
}  // namespace ddprun::launcher

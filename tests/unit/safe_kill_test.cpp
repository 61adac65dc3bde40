// The launcher's one way to send signals never reaches init, "every process" or its own group, and
// a signal through a pinned process (pidfd) never reaches the process that gets its pid after it.
#include "launcher/base/safe_kill.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ddprun::launcher {
namespace {

TEST(SafeKill, RefusesEveryPidAtOrBelowOne) {
  // Signal 0 only checks: even so, none of these may reach the kernel.
  for (pid_t pid : {1, 0, -1, -2, -1000}) {
    errno = 0;
    EXPECT_FALSE(signal_process(pid, 0)) << pid;
    EXPECT_EQ(errno, EINVAL) << pid;
    errno = 0;
    EXPECT_FALSE(signal_process_group(pid, 0)) << pid;
    EXPECT_EQ(errno, EINVAL) << pid;
  }
}

TEST(SafeKill, SignalsARealProcessAndItsGroup) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setpgid(0, 0);
    ::pause();
    ::_exit(0);
  }
  ::setpgid(child, child);
  EXPECT_TRUE(signal_process(child, 0));
  EXPECT_TRUE(signal_process_group(child, SIGKILL));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(SafeKill, APinnedProcessGetsTheSignalAndOnceReapedNothingDoes) {
  for (pid_t pid : {1, 0, -1}) {
    errno = 0;
    EXPECT_LT(pin_process(pid).get(), 0) << pid;
    EXPECT_EQ(errno, EINVAL) << pid;
  }
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  UniqueFd pin = pin_process(child);
  ASSERT_GE(pin.get(), 0) << std::strerror(errno);
  EXPECT_TRUE(signal_pinned(pin, 0));
  EXPECT_TRUE(signal_pinned(pin, SIGKILL));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  // Reaped: its pid may belong to another process by now; the pin reaches none.
  errno = 0;
  EXPECT_FALSE(signal_pinned(pin, SIGTERM));
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(signal_pinned(UniqueFd(), 0));
}

}  // namespace
}  // namespace ddprun::launcher

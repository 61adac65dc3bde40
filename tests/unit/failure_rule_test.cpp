// Which exits count as failures in the summary, by table.
#include "launcher/report/failure_rule.hpp"

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

TEST(FailureRule, ByTable) {
  struct Case {
    int exitcode;
    int stop_signal_sent;
    bool kill_sent;
    bool failed;
  };
  const Case cases[] = {
      {0, 0, false, false},              {0, SIGTERM, true, false},         // success is never a failure
      {1, 0, false, true},               {-SIGKILL, 0, false, true},        // before any stop: all count
      {-SIGTERM, 0, false, true},        {-SIGSEGV, 0, false, true},
      {-SIGTERM, SIGTERM, false, false}, {143, SIGTERM, false, false},      // our stop, or a shell saying so
      {-SIGKILL, SIGTERM, false, true},  {137, SIGTERM, false, true},       // a SIGKILL we did not send yet
      {-SIGKILL, SIGTERM, true, false},  {137, SIGTERM, true, false},       // the SIGKILL after the grace
      {21, SIGTERM, false, true},        {-SIGSEGV, SIGTERM, true, true},   // exits of their own
      {-SIGINT, SIGINT, false, false},   {-SIGTERM, SIGINT, false, true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(failed_on_its_own(c.exitcode, c.stop_signal_sent, c.kill_sent), c.failed)
        << "exitcode " << c.exitcode << " stop " << c.stop_signal_sent << " kill " << c.kill_sent;
  }
}

}  // namespace
}  // namespace ddprun::launcher

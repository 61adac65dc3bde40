// The terminal settings ddprun uses, as pure functions of the settings found.
#include "launcher/terminal/terminal_mode.hpp"
#include "launcher/workers/worker_pty.hpp"

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

termios a_shell_terminal() {
  termios t{};
  t.c_iflag = ICRNL | IXON;
  t.c_oflag = OPOST | ONLCR;
  t.c_lflag = ISIG | ICANON | ECHO | ECHOE | ECHOK | IEXTEN;
  t.c_cc[VMIN] = 0;
  t.c_cc[VTIME] = 5;
  t.c_cc[VINTR] = 3;
  return t;
}

TEST(ForwardingMode, KeysGoToTheWorkerButCtrlCStaysOurs) {
  termios t = forwarding_mode(a_shell_terminal());
  EXPECT_FALSE(t.c_lflag & ICANON);  // the worker's pty edits lines
  EXPECT_FALSE(t.c_lflag & ECHO);    // and echoes them
  EXPECT_FALSE(t.c_lflag & IEXTEN);  // Ctrl-V reaches the worker
  EXPECT_TRUE(t.c_lflag & ISIG);     // Ctrl-C signals ddprun, which stops the job
  EXPECT_EQ(t.c_cc[VINTR], 3);
  EXPECT_EQ(t.c_cc[VMIN], 1);
  EXPECT_EQ(t.c_cc[VTIME], 0);
  EXPECT_EQ(t.c_oflag, static_cast<tcflag_t>(OPOST | ONLCR));  // ddprun's own output unchanged
  EXPECT_EQ(t.c_iflag, static_cast<tcflag_t>(ICRNL | IXON));
}

TEST(WorkerPtyMode, OutputAsWrittenInputAsAtAShell) {
  termios t = worker_pty_mode(a_shell_terminal());
  EXPECT_FALSE(t.c_oflag & OPOST);  // no "\n" -> "\r\n": ddprun reads the bytes written
  EXPECT_TRUE(t.c_lflag & ICANON);  // pdb and input() get line editing
  EXPECT_TRUE(t.c_lflag & ECHO);
  EXPECT_TRUE(t.c_lflag & ISIG);
}

}  // namespace
}  // namespace ddprun::launcher

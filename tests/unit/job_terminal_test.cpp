// JobTerminal: the workers' terminal from --pty, stdin targets, the pty warning once; and which
// settings a command line asks for. Ctrl-Z and window changes on a real terminal are
// integration tests (job_control, terminal), which need one.
#include "launcher/terminal/job_terminal.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "cli_parse.hpp"

namespace ddprun::launcher {
namespace {

using cli_testing::parse;

JobTerminalHandlers handlers(std::vector<std::string>& printed) {
  JobTerminalHandlers h;
  h.signal_workers = [](int) {};
  h.window_changed = [](const std::optional<winsize>&) {};
  h.print = [&printed](const std::string& line) { printed.push_back(line); };
  return h;
}

TEST(TerminalSettings, FromTheCommandLine) {
  TerminalSettings settings = terminal_settings(parse({"--pty", "on", "/bin/true"}));
  EXPECT_EQ(settings.pty, PtyMode::on);
  EXPECT_TRUE(settings.forward_stdin);  // --stdin rank0 by default
  EXPECT_TRUE(settings.pause_on_ctrl_z);
  EXPECT_FALSE(terminal_settings(parse({"--stdin", "none", "/bin/true"})).forward_stdin);
  EXPECT_FALSE(terminal_settings(parse({"--forward-signals", "SIGTSTP", "/bin/true"})).pause_on_ctrl_z);
  EXPECT_FALSE(terminal_settings(parse({"--signals-to-handle", "SIGTERM,SIGTSTP", "/bin/true"})).pause_on_ctrl_z);
}

TEST(JobTerminal, WorkersGetWhatPtyAsks) {
  boost::asio::io_context io;
  std::vector<std::string> printed;
  EXPECT_EQ(JobTerminal(io, {PtyMode::on, false, false}, handlers(printed)).worker_terminal(), WorkerTerminal::pty);
  EXPECT_EQ(JobTerminal(io, {PtyMode::off, false, false}, handlers(printed)).worker_terminal(), WorkerTerminal::pipes);
}

TEST(JobTerminal, WithoutStdinAWorkersStdinIsClosed) {
  boost::asio::io_context io;
  std::vector<std::string> printed;
  JobTerminal terminal(io, {PtyMode::off, false, false}, handlers(printed));
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  terminal.add_stdin_target(1234, fds[1], false);
  EXPECT_EQ(::fcntl(fds[1], F_GETFD), -1);  // closed: the worker reads end of input
  char byte;
  EXPECT_EQ(::read(fds[0], &byte, 1), 0);
  ::close(fds[0]);
  terminal.remove_stdin_target(1234);
}

TEST(JobTerminal, APtyThatCannotBeHadIsWarnedAboutOnce) {
  boost::asio::io_context io;
  std::vector<std::string> printed;
  JobTerminal terminal(io, {PtyMode::automatic, false, false}, handlers(printed));
  terminal.pty_unavailable("no ptys left");
  terminal.pty_unavailable("no ptys left");
  EXPECT_EQ(printed, (std::vector<std::string>{"warning: no ptys left; workers write to pipes instead"}));
}

}  // namespace
}  // namespace ddprun::launcher

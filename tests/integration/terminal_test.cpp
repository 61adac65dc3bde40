// Workers on pseudo-terminals and stdin forwarding (issue 11, items 1 and 2), driven as a user at a
// terminal drives ddprun: ddprun runs on a pty of the test's own (forkpty), or inside tmux whose
// screen is read back with capture-pane; keys are typed into the pty. Nothing is mocked.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../support/free_port.hpp"
#include "harness.hpp"
#include "pty_launch.hpp"
#include "tmux_session.hpp"

namespace ddprun::testing {
namespace {

using namespace std::chrono_literals;

const std::filesystem::path kData = std::filesystem::path(__FILE__).parent_path() / "data";
const char* kRankPrefix = "--log-line-prefix-template=[${rank}]:";

bool has_system_python() { return ::access(kSystemPython, X_OK) == 0; }

/// The worker of rank 0 among the processes whose command line holds `argument`; 0 when none.
pid_t rank_zero_running(const std::string& argument) {
  for (pid_t pid : processes_with_argument(argument)) {
    std::istringstream environ(read_file("/proc/" + std::to_string(pid) + "/environ"));
    for (std::string entry; std::getline(environ, entry, '\0');) {
      if (entry == "RANK=0") return pid;
    }
  }
  return 0;
}

/// Whether `pid` sleeps in select, poll or read: waiting for its terminal, not still on its way there.
bool waiting_for_input(pid_t pid) {
  const std::string syscall = read_file("/proc/" + std::to_string(pid) + "/syscall");
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto state = stat.rfind(") ");
  if (syscall.empty() || syscall.starts_with("running") || state == std::string::npos || stat[state + 2] != 'S') {
    return false;
  }
  const long number = std::strtol(syscall.c_str(), nullptr, 10);
  std::vector<long> waits{SYS_read, SYS_pselect6, SYS_ppoll};
#ifdef SYS_select
  waits.push_back(SYS_select);
#endif
#ifdef SYS_poll
  waits.push_back(SYS_poll);
#endif
  return std::find(waits.begin(), waits.end(), number) != waits.end();
}

// (a) A C++ trainer that printf()s a line now and then, never flushing: on a pty its lines arrive
// while it runs; on a pipe (--pty off) C stdio holds them until it exits.
TEST(Terminal, PrintfTrainerLinesArriveWhileItRuns) {
  PtyLaunch launch({"--standalone", "--nproc_per_node=1", "--no-python", test_worker_binary(), "ticks", "20", "150"});
  ASSERT_TRUE(launch.wait_for("tick 1\n", 20s)) << launch.output();
  EXPECT_TRUE(launch.running());
  EXPECT_EQ(launch.output().find("tick 20"), std::string::npos) << "the first line came with the last";
  EXPECT_EQ(launch.wait_exit(), 0) << launch.output();
  EXPECT_NE(launch.output().find("tick 20\n"), std::string::npos);
  // No "\r\n" from the worker's pty: its bytes come through as written.
  EXPECT_EQ(launch.output().find("tick 1\r"), std::string::npos) << launch.output();
}

TEST(Terminal, PrintfTrainerOnPipesIsHeldBackUntilItExits) {
  PtyLaunch launch({"--standalone", "--nproc_per_node=1", "--pty=off", "--no-python", test_worker_binary(), "ticks",
                    "10", "100"});
  ASSERT_TRUE(launch.wait_for("tick 1\n", 20s)) << launch.output();
  EXPECT_TRUE(launch.wait_for("tick 10\n", 100ms)) << "block-buffered: the first line comes with the last";
  EXPECT_EQ(launch.wait_exit(), 0);
}

// (c) isatty in the worker: stdout and stderr on ptys; stdin a pty for rank 0 only (the others
// read /dev/null); with --pty off, pipes (rank 0's stdin a pipe from ddprun).
TEST(Terminal, WorkersSeeATerminalUnderAPty) {
  PtyLaunch launch({"--standalone", "--nproc_per_node=2", kRankPrefix, "--no-python", test_worker_binary(), "isatty"});
  EXPECT_EQ(launch.wait_exit(), 0) << launch.output();
  EXPECT_NE(launch.output().find("[0]:isatty 0=1 1=1 2=1\n"), std::string::npos) << launch.output();
  EXPECT_NE(launch.output().find("[1]:isatty 0=0 1=1 2=1\n"), std::string::npos) << launch.output();
  EXPECT_NE(launch.output().find("[1]:size 40x120\n"), std::string::npos) << "ddprun's window size, passed on";
}

// A resized terminal: each worker's pty gets the new size, and the worker a SIGWINCH.
TEST(Terminal, WindowSizeFollowsTheTerminal) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  PtyLaunch launch({"--standalone", "--nproc_per_node=2", kRankPrefix, "--no-python", kSystemPython,
                    (kData / "window_size.py").string()});
  ASSERT_TRUE(launch.wait_for("[0]:size 40x120")) << launch.output();
  ASSERT_TRUE(launch.wait_for("[1]:size 40x120")) << launch.output();
  launch.resize(30, 90);
  EXPECT_TRUE(launch.wait_for("[0]:now 30x90")) << launch.output();
  EXPECT_TRUE(launch.wait_for("[1]:now 30x90")) << launch.output();
  EXPECT_EQ(launch.wait_exit(), 0) << launch.output();
}

TEST(Terminal, WorkersSeePipesWithPtyOff) {
  PtyLaunch launch(
      {"--standalone", "--nproc_per_node=2", "--pty=off", kRankPrefix, "--no-python", test_worker_binary(), "isatty"});
  EXPECT_EQ(launch.wait_exit(), 0) << launch.output();
  EXPECT_NE(launch.output().find("[0]:isatty 0=0 1=0 2=0"), std::string::npos) << launch.output();
  EXPECT_NE(launch.output().find("[1]:isatty 0=0 1=0 2=0"), std::string::npos) << launch.output();
}

TEST(Terminal, PtyOnGivesATerminalWithoutOne) {
  Outcome outcome = run_ddprun({"--standalone", "--nproc_per_node=1", "--pty=on", "--no-python", test_worker_binary(), "isatty"});
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("isatty 0=1 1=1 2=1"), std::string::npos) << outcome.out;
  Outcome automatic = run_ddprun({"--standalone", "--nproc_per_node=1", "--no-python", test_worker_binary(), "isatty"});
  EXPECT_NE(automatic.out.find("isatty 0=0 1=0 2=0"), std::string::npos) << automatic.out;
}

// (b) A tqdm-like bar on rank 0 while rank 1 prints whole lines: on the screen (tmux), the bar is one
// line with its prefix and its last state, and rank 1's lines are whole.
TEST(Terminal, ProgressBarIsDrawnInPlaceWithItsPrefix) {
  if (std::system("tmux -V >/dev/null 2>&1") != 0) GTEST_SKIP() << "tmux is not installed";
  TempDir tmp;
  Tmux tmux("TMPDIR=" + tmp.str() + " NO_COLOR=1 " + ddprun_binary() +
            " --standalone --nproc_per_node=2 '--log-line-prefix-template=[${rank}]:' --no-python " +
            test_worker_binary() + " bar 15 60; echo EXIT=$?; sleep 60");
  ASSERT_TRUE(tmux.wait_for("EXIT=")) << tmux.screen();
  std::string screen = tmux.screen();
  EXPECT_NE(screen.find("EXIT=0"), std::string::npos) << screen;
  std::vector<std::string> lines = split_lines(screen);
  int bar_lines = 0;
  for (const auto& line : lines) {
    if (line.find("bar ") != std::string::npos) {
      ++bar_lines;
      EXPECT_EQ(line.substr(0, line.find_last_not_of(' ') + 1), "[0]:bar 15/15") << screen;
    }
  }
  EXPECT_EQ(bar_lines, 1) << screen;
  for (int i = 1; i <= 15; ++i) {
    std::string line = "[1]:line " + std::to_string(i);
    EXPECT_EQ(std::count(lines.begin(), lines.end(), line), 1) << line << "\n" << screen;
  }
}

// Not a terminal: the bar's last state, once, without its frames; the log file keeps the frames.
TEST(Terminal, ProgressBarOnAPipeShowsItsLastState) {
  TempDir logs;
  Outcome outcome = run_ddprun({"--standalone", "--nproc_per_node=2", kRankPrefix, "--log-dir=" + logs.str(), "-t", "0:1",
                                "--no-python", test_worker_binary(), "bar", "15", "5"});
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("[0]:bar 15/15\n"), std::string::npos) << outcome.out;
  EXPECT_EQ(outcome.out.find('\r'), std::string::npos) << outcome.out;
  EXPECT_EQ(outcome.out.find("bar 14/15"), std::string::npos) << outcome.out;
  std::string log;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(logs.path())) {
    if (entry.path().filename() == "stdout.log" && entry.path().parent_path().filename() == "0") log = read_file(entry.path());
  }
  EXPECT_NE(log.find("\rbar 14/15\rbar 15/15\n"), std::string::npos) << log;
}

// (d) pdb on rank 0 through the pty: `p x+1` prints 42, `c` continues, the job ends well.
TEST(Terminal, PdbOnRankZero) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  PtyLaunch launch({"--standalone", "--nproc_per_node=2", "--no-python", kSystemPython, (kData / "pdb_rank0.py").string()});
  ASSERT_TRUE(launch.wait_for("(Pdb) ")) << launch.output();
  std::size_t prompt = launch.output().size();
  launch.type("p x+1\n");
  ASSERT_TRUE(launch.wait_for("42", 20s, prompt)) << launch.output();
  launch.type("c\n");
  EXPECT_EQ(launch.wait_exit(), 0) << launch.output();
  EXPECT_NE(launch.output().find("rank 0 done"), std::string::npos) << launch.output();
  EXPECT_NE(launch.output().find("rank 1 done"), std::string::npos) << launch.output();
}

// (g) Ctrl-C typed while rank 0 waits in pdb stops the job (the second one at once), and ddprun's
// terminal, in forwarding mode meanwhile, is back in its own mode afterwards.
TEST(Terminal, CtrlCInPdbStopsTheJobAndRestoresTheTerminal) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  PtyLaunch launch({"--standalone", "--nproc_per_node=2", "--no-python", kSystemPython, (kData / "pdb_rank0.py").string()});
  const termios before = launch.initial_mode();
  ASSERT_TRUE(before.c_lflag & ICANON);
  ASSERT_TRUE(launch.wait_for("(Pdb) ")) << launch.output();
  termios during = launch.mode();
  EXPECT_FALSE(during.c_lflag & ICANON);
  EXPECT_FALSE(during.c_lflag & ECHO);
  EXPECT_TRUE(during.c_lflag & ISIG);
  // Ctrl-C once pdb waits for its input, as a user sees it wait. Seeing the prompt is not enough:
  // CPython's readline prints the prompt, then select()s on the terminal, and a SIGINT in between
  // only sets Python's flag, which nothing reads until a key comes: the KeyboardInterrupt is lost
  // (python3 alone on a pty shows it, its prompt's write held by strace). A rank 0 descheduled after
  // its prompt, on a loaded machine, lost the test's Ctrl-C so: no KeyboardInterrupt for 20 s.
  const std::string script = (kData / "pdb_rank0.py").string();
  pid_t rank_zero = 0;
  ASSERT_TRUE(eventually([&] { return (rank_zero = rank_zero_running(script)) != 0 && waiting_for_input(rank_zero); }))
      << "rank 0 (pid " << rank_zero << ") does not wait for its terminal: "
      << read_file("/proc/" + std::to_string(rank_zero) + "/syscall") << launch.output();
  launch.type("\x03");
  // pdb got the forwarded SIGINT.
  ASSERT_TRUE(launch.wait_for("KeyboardInterrupt")) << launch.describe_signals() << "\n" << launch.output();
  launch.type("\x03");
  EXPECT_EQ(launch.wait_exit(), 128 + SIGINT) << launch.output();
  termios after = launch.mode();
  EXPECT_EQ(after.c_lflag, before.c_lflag);
  EXPECT_EQ(after.c_iflag, before.c_iflag);
  EXPECT_EQ(0, std::memcmp(after.c_cc, before.c_cc, sizeof after.c_cc));
}

// After a restart, the new rank 0 reads the terminal (and its pty takes the keys again).
TEST(Terminal, RestartedRankZeroGetsTheInput) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  PtyLaunch launch({"--standalone", "--nproc_per_node=2", "--max-restarts=1", "--no-python", kSystemPython,
                    (kData / "restart_stdin.py").string()});
  ASSERT_TRUE(launch.wait_for("ready")) << launch.output();
  EXPECT_FALSE(launch.mode().c_lflag & ICANON) << "the terminal passes keys on to the new rank 0's pty";
  launch.type("again\n");
  EXPECT_TRUE(launch.wait_for("rank 0 got again")) << launch.output();
  EXPECT_EQ(launch.wait_exit(), 0) << launch.output();
}

// (e) Piped stdin is rank 0's; rank 1 reads /dev/null. (f) --stdin none: nobody's, and unread.
TEST(Terminal, PipedStdinIsAnsweredOnRankZero) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  std::string command = "printf 'answer\\n' | exec " + ddprun_binary() + " --standalone --nproc_per_node=2 --no-python " +
                        kSystemPython + " " + (kData / "read_stdin.py").string();
  Outcome outcome = run_ddprun_via({"/bin/sh", "-c", command});
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("rank 0 got answer\n"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("rank 1 EOF\n"), std::string::npos) << outcome.out;
}

TEST(Terminal, StdinAllGoesToEveryWorker) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  std::string command = "printf 'answer\\n' | exec " + ddprun_binary() +
                        " --standalone --nproc_per_node=2 --stdin=all --no-python " + kSystemPython + " " +
                        (kData / "read_stdin.py").string();
  Outcome outcome = run_ddprun_via({"/bin/sh", "-c", command});
  EXPECT_NE(outcome.out.find("rank 0 got answer\n"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("rank 1 got answer\n"), std::string::npos) << outcome.out;
}

TEST(Terminal, StdinNoneLeavesItUnread) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  std::string command = "printf 'answer\\n' | { " + ddprun_binary() + " --standalone --nproc_per_node=2 --stdin=none --no-python " +
                        kSystemPython + " " + (kData / "read_stdin.py").string() + "; echo after; cat; }";
  Outcome outcome = run_ddprun_via({"/bin/sh", "-c", command});
  EXPECT_NE(outcome.out.find("rank 0 EOF\n"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("rank 1 EOF\n"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("after\nanswer\n"), std::string::npos) << outcome.out;
}

// No pty to be had (/dev/ptmx is /dev/null here, in a mount namespace of the test's): --pty on
// fails with one line naming the cause; auto, on a terminal, falls back to pipes with one warning.
TEST(Terminal, NoPtyFailsOnAndFallsBackInAuto) {
  if (::geteuid() != 0 || std::system("unshare -m true 2>/dev/null") != 0) GTEST_SKIP() << "needs root for a mount namespace";
  auto without_ptys = [](const std::string& flags) {
    return std::vector<std::string>{"/usr/bin/unshare", "-m", "/bin/sh", "-c",
                                    "mount --bind /dev/null /dev/ptmx && exec " + ddprun_binary() + " " + flags +
                                        " --standalone --nproc_per_node=2 --no-python /bin/sh -c \"printenv PYTHONUNBUFFERED; exec " +
                                        test_worker_binary() + " isatty\""};
  };
  Outcome fail = run_ddprun_via(without_ptys("--pty=on"));
  EXPECT_EQ(fail.exit_status, 1) << fail.err;
  std::string line = fail.err.substr(fail.err.rfind('\n', fail.err.size() - 2) + 1);
  EXPECT_NE(line.find("cannot open a pseudo-terminal"), std::string::npos) << fail.err;
  EXPECT_NE(line.find("(--pty on)"), std::string::npos) << fail.err;

  PtyLaunch fallback(without_ptys(""), PtyLaunch::as_given);
  EXPECT_EQ(fallback.wait_exit(), 0) << fallback.output();
  const std::string& out = fallback.output();
  std::size_t warnings = 0;
  for (std::size_t at = out.find("workers write to pipes instead"); at != std::string::npos;
       at = out.find("workers write to pipes instead", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1U) << out;
  EXPECT_NE(out.find("isatty 0=0 1=0 2=0"), std::string::npos) << out;
  EXPECT_NE(out.find("\n1\n"), std::string::npos) << "pipes after all: PYTHONUNBUFFERED=1\n" << out;
}

/// `fg` in the tmux's shell, then a line typed for rank 0 (read_stdin.py), which must say it got it.
void bring_back_and_answer(const Tmux& tmux) {
  tmux.keys("fg");
  tmux.keys("Enter");
  std::this_thread::sleep_for(500ms);
  tmux.keys("answer", true);
  tmux.keys("Enter");
  EXPECT_TRUE(tmux.wait_for("rank 0 got answer")) << tmux.screen();
}

// `ddprun ... &` from an interactive shell, rank 0 waiting for input: ddprun is not stopped by
// SIGTTIN (it does not read the terminal from the background); brought back with fg, it forwards.
TEST(Terminal, BackgroundDdprunIsNotStoppedAndReadsOnceInTheForeground) {
  if (std::system("tmux -V >/dev/null 2>&1") != 0) GTEST_SKIP() << "tmux is not installed";
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  TempDir tmp;
  Tmux tmux("env -i PATH=/usr/bin:/bin TERM=xterm PS1='$ ' bash --norc --noprofile -i");
  ASSERT_TRUE(tmux.wait_for("$")) << tmux.screen();  // the prompt (capture-pane drops trailing blanks)
  const std::string pid_file = (tmp.path() / "pid").string();
  tmux.keys("TMPDIR=" + tmp.str() + " " + ddprun_binary() + " --standalone --nproc_per_node=2 --no-python " +
                kSystemPython + " " + (kData / "read_stdin.py").string() + " & echo $! > " + pid_file,
            true);
  tmux.keys("Enter");
  pid_t pid = 0;
  ASSERT_TRUE(eventually([&] { return (std::ifstream(pid_file) >> pid) && pid > 0; })) << tmux.screen();
  ASSERT_TRUE(tmux.wait_for("rank 1 EOF")) << tmux.screen();  // the job runs; rank 0 waits for input
  std::this_thread::sleep_for(500ms);
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  char state = stat.at(stat.rfind(')') + 2);
  EXPECT_NE(state, 'T') << "stopped in the background: " << stat;
  // A line for the shell: ddprun sees input it must not read, and waits to be in the foreground.
  // bash's fg of a running job then sends no SIGCONT: ddprun has to notice by itself.
  tmux.keys("true", true);
  tmux.keys("Enter");
  std::this_thread::sleep_for(500ms);
  bring_back_and_answer(tmux);
  EXPECT_TRUE(eventually([&] { return !process_alive(pid); })) << tmux.screen();
}

// Ctrl-Z typed while rank 0 waits for input on its pty: the shell gets the job stopped and its
// terminal back in its own mode (ddprun had it in -icanon -echo); fg continues the job, which
// takes the terminal again and forwards the next line.
TEST(Terminal, CtrlZStopsTheJobAndGivesTheShellItsTerminalBack) {
  if (std::system("tmux -V >/dev/null 2>&1") != 0) GTEST_SKIP() << "tmux is not installed";
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  TempDir tmp;
  Tmux tmux("env -i PATH=/usr/bin:/bin TERM=xterm PS1='$ ' bash --norc --noprofile -i");
  ASSERT_TRUE(tmux.wait_for("$")) << tmux.screen();
  // A copy of its own, so that its processes are told from other tests' by their command line.
  const std::filesystem::path script = tmp.path() / "read_stdin.py";
  std::filesystem::copy_file(kData / "read_stdin.py", script);
  const std::string before = (tmp.path() / "stty_before").string();
  const std::string after = (tmp.path() / "stty_after").string();
  tmux.keys("stty -a > " + before + "; TMPDIR=" + tmp.str() + " " + ddprun_binary() +
                " --standalone --nproc_per_node=2 --no-python " + kSystemPython + " " + script.string(),
            true);
  tmux.keys("Enter");
  ASSERT_TRUE(tmux.wait_for("rank 1 EOF")) << tmux.screen();  // rank 0 waits for its line
  tmux.keys("C-z");
  ASSERT_TRUE(tmux.wait_for("Stopped")) << tmux.screen();
  // Rank 0, still waiting for its line, is paused with ddprun (before, it ran on: Ctrl-Z reached
  // ddprun alone). Rank 1 has ended already (its stdin is /dev/null).
  std::vector<char> states;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string cmdline = read_file(entry.path() / "cmdline");
    if (cmdline.rfind(kSystemPython, 0) != 0 || cmdline.find(script.string()) == std::string::npos) continue;
    std::string stat = read_file(entry.path() / "stat");
    if (!stat.empty()) states.push_back(stat.at(stat.rfind(')') + 2));
  }
  EXPECT_EQ(states, std::vector<char>{'T'}) << "rank 0's state";
  tmux.keys("stty -a > " + after, true);
  tmux.keys("Enter");
  ASSERT_TRUE(eventually([&] { return !read_file(after).empty(); })) << tmux.screen();
  EXPECT_EQ(read_file(after), read_file(before)) << "the shell got the terminal back in its own mode";
  bring_back_and_answer(tmux);
}

// Two nodes on loopback, each with "answer" on its stdin: only global rank 0 (on node 0) gets it; node
// 1 reads nothing of its stdin, which its shell's next command still finds there.
TEST(Terminal, OnlyTheNodeWithRankZeroForwards) {
  if (!has_system_python()) GTEST_SKIP() << kSystemPython << " is missing";
  const int port = free_port();
  auto node = [&](int node_rank) {
    return Launch::Command{{"/bin/sh", "-c",
                            "printf 'answer\\n' | { " + ddprun_binary() + " --nnodes=2 --node_rank=" + std::to_string(node_rank) +
                                " --master_addr=127.0.0.1 --master_port=" + std::to_string(port) +
                                " --nproc_per_node=2 --no-python " + kSystemPython + " " + (kData / "read_stdin.py").string() +
                                "; echo after; cat; }"}};
  };
  Launch first(node(0));
  Launch second(node(1));
  Outcome zero = first.wait();
  Outcome one = second.wait();
  EXPECT_NE(zero.out.find("rank 0 got answer\n"), std::string::npos) << zero.out << zero.err;
  EXPECT_NE(zero.out.find("rank 1 EOF\n"), std::string::npos) << zero.out;
  EXPECT_NE(zero.out.find("after\n"), std::string::npos) << zero.out;
  EXPECT_EQ(zero.out.find("after\nanswer"), std::string::npos) << "node 0 forwarded its stdin:\n" << zero.out;
  EXPECT_NE(one.out.find("rank 2 EOF\n"), std::string::npos) << one.out << one.err;
  EXPECT_NE(one.out.find("rank 3 EOF\n"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("after\nanswer\n"), std::string::npos) << "node 1 left its stdin unread:\n" << one.out;
}

// (h) No orphan after a SIGKILLed ddprun whose workers lead sessions on their ptys.
TEST(Terminal, NoOrphanAfterSigkillWithPtys) {
  TempDir dir;
  PtyLaunch launch({"--standalone", "--nproc_per_node=2", "--no-python", test_worker_binary(), "pid", dir.str()});
  std::vector<pid_t> pids;
  ASSERT_TRUE(eventually([&] {
    pids.clear();
    for (int rank : {0, 1}) {
      std::ifstream in(dir.path() / ("pid_" + std::to_string(rank)));
      pid_t pid = 0;
      if (in >> pid) pids.push_back(pid);
    }
    return pids.size() == 2;
  }));
  for (pid_t pid : pids) EXPECT_EQ(::getsid(pid), pid) << "a worker on a pty leads its own session";
  ::kill(launch.pid(), SIGKILL);
  launch.wait_exit();
  for (pid_t pid : pids) EXPECT_TRUE(eventually([&] { return !process_alive(pid); })) << pid;
}

}  // namespace
}  // namespace ddprun::testing

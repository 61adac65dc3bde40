// Stack capture on real processes: a Python process running ddprun's sitecustomize (python/) dumps
// its frames on the signal, a process that does not catch the signal never gets it, the signal
// cannot end a process that exec'd since its handler was seen, a pid that is no longer the agent's
// child (reused) gets nothing,
// gdb reads every thread's native frames, a gdb that hangs is killed at the timeout, and nothing is
// left running. Also the pure parts: SigCgt, the rank's file text, the Python folder's place.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "launcher/base/python_dir.hpp"
#include "launcher/observe/stack_capture.hpp"
#include "launcher/observe/stack_digest.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
const fs::path kPythonDir = fs::path(__FILE__).parent_path().parent_path().parent_path() / "python";
constexpr const char* kPython = "/usr/bin/python3";

TEST(CatchesSignal, ReadsSigCgt) {
  // A Python worker with faulthandler registered for 61 (and Python's own SIGINT handler, 2).
  const char* python = "Name:\tpython3\nSigBlk:\t0000000000000000\nSigIgn:\t0000000001001000\n"
                       "SigCgt:\t1000000100000002\nCapEff:\t0\n";
  EXPECT_TRUE(catches_signal(python, 61));
  EXPECT_TRUE(catches_signal(python, 2));
  EXPECT_TRUE(catches_signal(python, 33));
  EXPECT_FALSE(catches_signal(python, 15));
  EXPECT_FALSE(catches_signal(python, 13));  // ignored is not caught
  EXPECT_FALSE(catches_signal("SigCgt:\t0000000000000000\n", 61));
  EXPECT_FALSE(catches_signal("Name:\tsleep\n", 61));  // no line
  EXPECT_FALSE(catches_signal(python, 0));
  EXPECT_FALSE(catches_signal(python, 65));
}

TEST(StackDumpSignal, IsOneWhoseDefaultActionIsToIgnoreIt) {
  // SIGURG: a worker that exec'd since its handler was seen (and so has the default action again)
  // drops the signal instead of dying of it (issue 25). 61 (SIGRTMAX-3), before, ended it.
  EXPECT_EQ(stack_dump_signal(), SIGURG);
}

TEST(CheckStackSignal, OnlyAChildOfTheAgentThatCatchesTheSignal) {
  const int signo = SIGURG;  // bit 23 of SigCgt: 0x400000
  const std::string catching = "Name:\tpython3\nSigCgt:\t0000000180400002\n";
  const std::string not_catching = "Name:\tsleep\nSigCgt:\t0000000000000000\n";
  struct Case {
    const char* name;
    std::string stat;
    std::string status;
    StackSignalCheck check;
  };
  const std::vector<Case> cases{
      {"a worker of agent 100", "4242 (python3) S 100 4242 4242 0 -1", catching, StackSignalCheck::send},
      {"running", "4242 (python3) R 100 4242 4242 0 -1", catching, StackSignalCheck::send},
      {"not catching (no sitecustomize, or exec'd)", "4242 (sleep) S 100 4242 4242 0 -1", not_catching,
       StackSignalCheck::not_catching},
      {"another parent: the pid was reused", "4242 (python3) S 1 4242 4242 0 -1", catching, StackSignalCheck::not_ours},
      {"a parent whose pid starts like ours", "4242 (python3) S 1000 4242 4242", catching, StackSignalCheck::not_ours},
      {"a zombie", "4242 (python3) Z 100 4242 4242 0 -1", catching, StackSignalCheck::gone},
      {"dead", "4242 (python3) X 100 4242 4242 0 -1", catching, StackSignalCheck::gone},
      {"no such process (nothing read)", "", "", StackSignalCheck::gone},
      {"a name with spaces and parentheses", "4242 (a (b) S 1) S 100 4242 4242 0 -1", catching, StackSignalCheck::send},
      {"cut after the state", "4242 (python3) S", catching, StackSignalCheck::gone},
      {"a parent that is not a number", "4242 (python3) S x1 4242", catching, StackSignalCheck::gone},
  };
  for (const Case& c : cases) EXPECT_EQ(check_stack_signal(c.stat, c.status, 100, signo), c.check) << c.name;
}

TEST(StackFileText, SaysWhatWasCapturedAndWhyNot) {
  CapturedRank rank;
  rank.stacks.rank = 3;
  rank.stacks.pid = 4242;
  rank.python_note = "no Python frames (not a Python worker with ddprun's faulthandler)";
  rank.native_text = "Thread 1 (LWP 4242):\n#0  main ()\n";
  std::string text = stack_file_text(rank, "node7", 0);
  EXPECT_EQ(text.rfind("rank 3 (pid 4242) on node7, stacks captured by ddprun at ", 0), 0u) << text;
  EXPECT_NE(text.find("== Python frames (faulthandler, most recent call first) ==\nno Python frames (not a Python"),
            std::string::npos) << text;
  EXPECT_NE(text.find("== native frames (every thread, innermost first) ==\nThread 1 (LWP 4242):\n#0  main ()\n"),
            std::string::npos) << text;
}

TEST(PythonDir, BesideTheExecutableUnderShare) {
  testing_support::ScratchFolder tree("stack_capture");
  fs::create_directories(tree.root() / "bin");
  fs::create_directories(tree.root() / "share/ddprun/python");
  std::ofstream(tree.root() / "bin/ddprun") << "";
  EXPECT_FALSE(python_dir_for(tree.root() / "bin/ddprun"));  // no sitecustomize.py: not ddprun's tree
  std::ofstream(tree.root() / "share/ddprun/python/sitecustomize.py") << "";
  auto dir = python_dir_for(tree.root() / "bin/ddprun");
  ASSERT_TRUE(dir);
  EXPECT_EQ(*dir, fs::canonical(tree.root()) / "share/ddprun/python");
  fs::create_symlink(tree.root() / "bin/ddprun", tree.root() / "ddprun-link");  // a link elsewhere: its target's tree
  EXPECT_EQ(python_dir_for(tree.root() / "ddprun-link"), dir);
  EXPECT_FALSE(python_dir_for(tree.root() / "missing"));
}

/// A child process running `argv` with `env` added, its stdout to `out` (when given).
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env = {},
            const std::string& out = "") {
  pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    if (!out.empty()) std::freopen(out.c_str(), "w", stdout);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

bool has_python() { return ::access(kPython, X_OK) == 0; }

bool alive(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == 0;
}

void stop(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

/// Runs a capture to its end on a fresh loop (reaping what it starts, as the agent does).
struct Captured {
  std::vector<CapturedRank> digest;
  std::vector<CapturedRank> done;
  bool digest_before_done = false;
};
Captured capture(std::vector<StackTarget> targets, StackCaptureSettings settings) {
  boost::asio::io_context io;
  StackCapture capture(io, settings);
  Captured result;
  bool finished = false;
  EXPECT_TRUE(capture.start(
      std::move(targets), [&](const std::vector<CapturedRank>& ranks) { result.digest = ranks; },
      [&](const std::vector<CapturedRank>& ranks) {
        result.digest_before_done = !result.digest.empty();
        result.done = ranks;
        finished = true;
      }));
  EXPECT_TRUE(capture.busy() || finished);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!finished && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(50));
    io.restart();
  }
  EXPECT_TRUE(finished);
  return result;
}

/// Waits until `path` holds `text` (the child got as far as writing it).
bool wait_for_text(const fs::path& path, const std::string& text) {
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(path);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (content.find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(StackCapture, PythonFramesFromTheWorkersOwnFaulthandlerAndNativeFromGdb) {
  if (!has_python()) GTEST_SKIP() << kPython << " missing";
  testing_support::ScratchFolder dir("stack_capture");
  const fs::path script = dir.root() / "train.py";
  std::ofstream(script) << "import time\n"
                           "def wait_for_peers():\n"
                           "    print('ready', flush=True)\n"
                           "    time.sleep(600)\n"
                           "wait_for_peers()\n";
  const fs::path stacks = dir.root() / "python_stacks.txt";
  const fs::path out = dir.root() / "out.txt";
  pid_t python = spawn({kPython, "-u", script.string()},
                       {{"PYTHONPATH", kPythonDir.string()},
                        {"DDPRUN_PYTHON_STACKS_FILE", stacks.string()},
                        {"DDPRUN_STACKS_SIGNAL", std::to_string(stack_dump_signal())}},
                       out.string());
  ASSERT_TRUE(wait_for_text(out, "ready"));
  pid_t plain = spawn({"/bin/sleep", "600"});  // does not catch the signal: must never get it
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  StackCaptureSettings settings;
  auto result = capture({StackTarget{0, 0, 0, python, stacks.string()}, StackTarget{1, 1, 0, plain, stacks.string()}},
                        settings);
  EXPECT_TRUE(alive(python));
  EXPECT_TRUE(alive(plain)) << "the process that does not catch the signal was signalled";
  ASSERT_EQ(result.done.size(), 2u);
  const CapturedRank& py = result.done[0];
  EXPECT_NE(py.python_text.find("line 4 in wait_for_peers"), std::string::npos) << py.python_text;
  auto digest = stack_digest({py.stacks}, read_source_line);
  ASSERT_EQ(digest.size(), 1u);
  EXPECT_EQ(digest[0], "rank 0: time.sleep(600) <- train.py:4");
  // The digest came before gdb ended, from the Python frames alone.
  ASSERT_EQ(result.digest.size(), 2u);
  EXPECT_FALSE(result.digest[0].python_text.empty());
  EXPECT_TRUE(result.digest_before_done);

  const CapturedRank& native = result.done[1];
  EXPECT_TRUE(native.python_text.empty());
  EXPECT_NE(native.python_note.find("not a Python worker"), std::string::npos);
  if (::access("/usr/bin/gdb", X_OK) == 0) {
    EXPECT_NE(native.native_text.find("nanosleep"), std::string::npos) << native.native_text << native.native_note;
    ASSERT_FALSE(native.stacks.threads.empty()) << native.native_note;
    EXPECT_TRUE(native.stacks.error.empty());
    EXPECT_FALSE(py.stacks.threads.back().python);  // gdb's threads follow the Python ones
  }

  // A second capture reads only what the second dump added.
  auto again = capture({StackTarget{0, 0, 0, python, stacks.string()}}, StackCaptureSettings{.native = false});
  ASSERT_EQ(again.done.size(), 1u);
  EXPECT_EQ(again.done[0].python_text, py.python_text);
  stop(python);
  stop(plain);
}

TEST(StackDumpSignal, CannotEndAProcessThatExecdSinceItsHandlerWasSeen) {
  // The race of issue 25: ddprun saw the handler, the worker exec'd, the signal arrived.
  testing_support::ScratchFolder dir("stack_capture");
  const std::string signo = std::to_string(stack_dump_signal());
  pid_t child = spawn({"/bin/sh", "-c", "trap 'echo caught' " + signo + "; exec /bin/sleep 600"});
  ASSERT_TRUE(wait_for_text("/proc/" + std::to_string(child) + "/comm", "sleep"));
  ASSERT_TRUE(::kill(child, stack_dump_signal()) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(alive(child)) << "the stack signal ended a process that does not catch it";
  stop(child);
}

TEST(StackCapture, APidThatIsNoLongerTheAgentsChildGetsNoSignal) {
  // A status sample's pid whose worker ended: another process has it now (here a grandchild of
  // the test, which catches the signal and says so in a file). It must not be signalled.
  testing_support::ScratchFolder dir("stack_capture");
  const fs::path got = dir.root() / "got.txt";
  const fs::path pid_file = dir.root() / "pid.txt";
  const std::string inner = "trap 'echo got >> " + got.string() + "' " + std::to_string(stack_dump_signal()) +
                            "; echo $$ > " + pid_file.string() + ".tmp; mv " + pid_file.string() + ".tmp " +
                            pid_file.string() + "; while :; do sleep 0.05; done";
  pid_t parent = spawn({"/bin/sh", "-c", "/bin/sh -c \"$0\" & wait", inner});
  ASSERT_TRUE(wait_for_text(pid_file, "\n"));
  pid_t other = 0;
  std::ifstream(pid_file) >> other;
  ASSERT_GT(other, 1);
  ASSERT_TRUE(wait_for_text("/proc/" + std::to_string(other) + "/status", "SigCgt"));
  StackCaptureSettings settings;
  settings.python_timeout = std::chrono::milliseconds(300);
  settings.native = false;
  auto result = capture({StackTarget{0, 0, 0, other, (dir.root() / "stacks.txt").string()}}, settings);
  ASSERT_EQ(result.done.size(), 1u);
  EXPECT_NE(result.done[0].python_note.find("is no longer this job's worker"), std::string::npos)
      << result.done[0].python_note;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a trap runs after the shell's sleep
  EXPECT_FALSE(fs::exists(got)) << "a process that is not the agent's child got the stack signal";
  ::kill(other, SIGKILL);
  stop(parent);
}

TEST(StackCapture, AGdbThatHangsIsKilledAtTheTimeout) {
  testing_support::ScratchFolder dir("stack_capture");
  const fs::path fake = dir.root() / "gdb";
  const fs::path pid_file = dir.root() / "gdb.pid";
  std::ofstream(fake) << "#!/bin/sh\necho $$ > " << pid_file.string() << "\necho attaching\nexec sleep 600\n";
  fs::permissions(fake, fs::perms::owner_all);
  pid_t plain = spawn({"/bin/sleep", "600"});
  StackCaptureSettings settings;
  settings.gdb = fake.string();
  settings.gdb_timeout = std::chrono::milliseconds(300);
  auto result = capture({StackTarget{2, 0, 0, plain, ""}}, settings);
  ASSERT_EQ(result.done.size(), 1u);
  EXPECT_EQ(result.done[0].native_note, "gdb timed out after 0.3 s");
  EXPECT_EQ(result.done[0].native_text, "attaching\n");
  EXPECT_EQ(result.done[0].stacks.error, "gdb timed out after 0.3 s");
  std::ifstream in(pid_file);
  pid_t gdb = 0;
  in >> gdb;
  ASSERT_GT(gdb, 1);
  ::waitpid(gdb, nullptr, 0);  // the agent's reaper does this; here, the test
  EXPECT_NE(::kill(gdb, 0), 0) << "the hung gdb is still there";
  EXPECT_TRUE(alive(plain));
  stop(plain);
}

TEST(StackCapture, DroppingACaptureKillsItsGdb) {
  testing_support::ScratchFolder dir("stack_capture");
  const fs::path fake = dir.root() / "gdb";
  const fs::path pid_file = dir.root() / "gdb.pid";
  std::ofstream(fake) << "#!/bin/sh\necho $$ > " << pid_file.string() << "\nexec sleep 600\n";
  fs::permissions(fake, fs::perms::owner_all);
  pid_t plain = spawn({"/bin/sleep", "600"});
  boost::asio::io_context io;
  bool called = false;
  {
    StackCaptureSettings settings;
    settings.gdb = fake.string();
    StackCapture capture(io, settings);
    capture.start({StackTarget{0, 0, 0, plain, ""}}, [&](auto&) { called = true; }, [&](auto&) { called = true; });
    ASSERT_TRUE(wait_for_text(pid_file, "\n"));
  }
  io.run_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(called);
  std::ifstream in(pid_file);
  pid_t gdb = 0;
  in >> gdb;
  ASSERT_GT(gdb, 1);
  ::waitpid(gdb, nullptr, 0);
  EXPECT_NE(::kill(gdb, 0), 0) << "the gdb of a dropped capture is still there";
  stop(plain);
}

TEST(Sitecustomize, RunsTheOneItShadowsAndHidesItsVariablesFromChildren) {
  if (!has_python()) GTEST_SKIP() << kPython << " missing";
  testing_support::ScratchFolder dir("stack_capture");
  fs::create_directories(dir.root() / "user");
  std::ofstream(dir.root() / "user/sitecustomize.py") << "import sys\nsys.path.append('/added-by-user')\nUSER = 'yes'\n";
  const fs::path out = dir.root() / "out.txt";
  const fs::path stacks = dir.root() / "stacks.txt";
  pid_t python = spawn({kPython, "-c",
                        "import os, sys, sitecustomize\n"
                        "print(getattr(sitecustomize, 'USER', 'no'))\n"
                        "print(os.environ.get('DDPRUN_PYTHON_STACKS_FILE', 'unset'))\n"
                        "print('/added-by-user' in sys.path)\n"
                        "print(sys.path.index(" + std::string("'") + kPythonDir.string() + "'))\n"},
                       {{"PYTHONPATH", kPythonDir.string() + ":" + (dir.root() / "user").string()},
                        {"DDPRUN_PYTHON_STACKS_FILE", stacks.string()},
                        {"DDPRUN_STACKS_SIGNAL", std::to_string(stack_dump_signal())}},
                       out.string());
  int status = 0;
  ::waitpid(python, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(out);
  std::string user, variable, added, index;
  std::getline(in, user);
  std::getline(in, variable);
  std::getline(in, added);
  std::getline(in, index);
  EXPECT_EQ(user, "yes");        // the user's sitecustomize ran, and is the module "sitecustomize"
  EXPECT_EQ(variable, "unset");  // children of the worker do not dump into the rank's file
  EXPECT_EQ(added, "True");      // what the user's sitecustomize did to sys.path stays
  EXPECT_EQ(index, "1");         // ddprun's folder stays where it was (after the script's own folder)
  EXPECT_TRUE(fs::exists(stacks));
}

}  // namespace
}  // namespace ddprun::launcher

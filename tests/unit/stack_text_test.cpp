// Stack text readers and the digest, on real outputs recorded here (tests/unit/data/stacks/):
// gdb's `thread apply all bt` of PyTorch 1.13 gloo workers (one in all_reduce, one in time.sleep)
// and of plain_sgd --stall-rank 1 (rank 0 in the all-reduce, rank 1 in stall()), and faulthandler's
// dumps of the same Python workers (hang.py, the script they ran, is beside them).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/observe/stack_digest.hpp"
#include "launcher/observe/stack_text.hpp"

namespace ddprun::launcher {
namespace {

const std::filesystem::path kData = std::filesystem::path(__FILE__).parent_path() / "data" / "stacks";

std::string data(const std::string& name) {
  std::ifstream in(kData / name);
  EXPECT_TRUE(in) << "missing test data " << (kData / name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> functions(const ThreadStack& thread) {
  std::vector<std::string> names;
  for (const auto& frame : thread.frames) names.push_back(frame.function);
  return names;
}

TEST(GdbBacktrace, ReadsEveryThreadOfATorchWorkerInnermostFirst) {
  auto threads = parse_gdb_backtrace(data("torch_all_reduce.gdb.txt"));
  ASSERT_EQ(threads.size(), 6u);
  EXPECT_EQ(threads[0].name, "Thread 6 (LWP 4622)");
  EXPECT_FALSE(threads[0].python);
  const ThreadStack& main = threads.back();
  EXPECT_EQ(main.name, "Thread 1 (LWP 3435)");
  EXPECT_EQ(gdb_thread_lwp(main), 3435);
  ASSERT_EQ(main.frames.size(), 22u);
  EXPECT_EQ(main.frames[0].function, "__futex_abstimed_wait_common64");
  EXPECT_EQ(main.frames[0].location, "./nptl/futex-internal.c:57");
  EXPECT_EQ(main.frames[5].function, "c10d::Work::wait");  // parameter types dropped
  EXPECT_EQ(main.frames[5].location, "/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13");
  EXPECT_EQ(main.frames[6].function, "??");
  EXPECT_EQ(main.frames[9].function, "_PyObject_MakeTpCall");
  EXPECT_EQ(main.frames[9].location, "");
  EXPECT_EQ(main.frames[21].function, "_start");
  // A frame with templates and a nested parameter list in its name.
  EXPECT_EQ(threads[1].frames[9].function,
            "c10d::ProcessGroupGloo::AsyncWork::execute");
}

TEST(GdbBacktrace, ReadsFramesWithoutArguments) {
  auto threads = parse_gdb_backtrace(data("plain_sgd_rank1.gdb.txt"));
  ASSERT_FALSE(threads.empty());
  const ThreadStack& main = threads.back();
  EXPECT_EQ(functions(main), (std::vector<std::string>{"__GI___clock_nanosleep", "__GI___nanosleep",
                                                       "(anonymous namespace)::stall",
                                                       "std::_Function_handler<void (std::vector<double, std::allocator<double> >&), main::{lambda(std::vector<double, std::allocator<double> >&)#1}>::_M_invoke",
                                                       "(anonymous namespace)::train", "main"}));
}

TEST(GdbBacktrace, OddLines) {
  auto threads = parse_gdb_backtrace(
      "ptrace: Operation not permitted.\n"
      "Thread 2 (process 77):\n"
      "#0  <signal handler called>\n"
      "#1  0x0000000000401000 in ?? ()\n"
      "#2  0x0000000000401234 in foo::operator()(int) const (this=0x1) at a.cpp:12\n"
      "#3  bar (x=<optimized out>) at b.cc:7\n"
      "Thread 1 (LWP 76):\n"
      "#0  0x00007f in poll () from /lib/x86_64-linux-gnu/libc.so.6\n"
      "#1  0x00007f in");  // cut short
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads[0].name, "Thread 2 (LWP 77)");
  EXPECT_EQ(functions(threads[0]), (std::vector<std::string>{"<signal handler called>", "??", "foo::operator()", "bar"}));
  EXPECT_EQ(threads[0].frames[2].location, "a.cpp:12");
  EXPECT_EQ(functions(threads[1]), (std::vector<std::string>{"poll", "??"}));
  EXPECT_EQ(threads[1].frames[0].location, "/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_TRUE(parse_gdb_backtrace("").empty());
  EXPECT_TRUE(parse_gdb_backtrace("ptrace: Operation not permitted.\n").empty());
}

TEST(Faulthandler, ReadsEveryPythonThreadMainLast) {
  auto threads = parse_faulthandler(data("threads.faulthandler.txt"));
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_TRUE(threads[0].python);
  EXPECT_EQ(threads[0].name, "Thread 0x00007f57229726c0");
  EXPECT_EQ(functions(threads[0]), (std::vector<std::string>{"worker", "run", "_bootstrap_inner", "_bootstrap"}));
  EXPECT_EQ(threads[1].name, "Thread 0x00007f5722c2d040");
  EXPECT_EQ(threads[1].frames[0].function, "inner");
  EXPECT_EQ(threads[1].frames[0].location, "/tmp/hb/threads.py:8");
  EXPECT_EQ(threads[1].frames[1].function, "<module>");

  auto torch = parse_faulthandler(data("torch_all_reduce.faulthandler.txt"));
  ASSERT_EQ(torch.size(), 1u);
  EXPECT_EQ(torch[0].frames[0].location,
            "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:1541");
  EXPECT_EQ(torch[0].frames[0].function, "all_reduce");
}

TEST(Faulthandler, OddLines) {
  auto threads = parse_faulthandler(
      "Stack (most recent call first):\n"
      "  <no Python frame>\n"
      "\n"
      "Thread 0x0000000000000001 (most recent call first):\n"
      "  File \"a.py\", line 3 in f\n"
      "  ...\n"
      "  File \"b.py\", line 4");  // cut short: no " in FUNC"
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads[0].name, "Stack");
  EXPECT_TRUE(threads[0].frames.empty());
  ASSERT_EQ(threads[1].frames.size(), 2u);
  EXPECT_EQ(threads[1].frames[1].location, "b.py:4");
  EXPECT_EQ(threads[1].frames[1].function, "???");
}

/// hang.py's lines, as the digest's source reader (the recorded paths were /tmp/hb/...).
std::optional<std::string> recorded_source(const std::string& path, int line) {
  std::ifstream in(kData / std::filesystem::path(path).filename());
  std::string text;
  for (int i = 0; i < line && std::getline(in, text); ++i) {
  }
  if (!in) return std::nullopt;
  auto first = text.find_first_not_of(' ');
  return first == std::string::npos ? std::string() : text.substr(first);
}

RankStacks rank_of(int rank, pid_t pid, std::vector<ThreadStack> native, std::vector<ThreadStack> python = {}) {
  RankStacks stacks;
  stacks.rank = rank;
  stacks.pid = pid;
  stacks.threads = std::move(python);
  for (auto& thread : native) stacks.threads.push_back(std::move(thread));
  return stacks;
}

TEST(StackDigest, PythonRanksByTheirOwnLineTheOddOneFirst) {
  auto reduce_py = parse_faulthandler(data("torch_all_reduce.faulthandler.txt"));
  auto sleep_py = parse_faulthandler(data("torch_sleep.faulthandler.txt"));
  auto reduce_native = parse_gdb_backtrace(data("torch_all_reduce.gdb.txt"));
  std::vector<RankStacks> ranks = {rank_of(0, 3435, reduce_native, reduce_py), rank_of(1, 3436, {}, sleep_py),
                                   rank_of(2, 1, {}, reduce_py), rank_of(3, 1, {}, reduce_py)};
  EXPECT_EQ(stack_digest(ranks, recorded_source),
            (std::vector<std::string>{"rank 1: time.sleep(3600) <- hang.py:8", "ranks 0,2,3: all_reduce <- hang.py:9"}));
  // Without the source, the line itself.
  EXPECT_EQ(stack_digest(ranks), (std::vector<std::string>{"rank 1: hang.py:8", "ranks 0,2,3: all_reduce <- hang.py:9"}));
}

TEST(StackDigest, NativeRanksByTheirMainThread) {
  auto reduce = parse_gdb_backtrace(data("plain_sgd_rank0.gdb.txt"));
  auto stalled = parse_gdb_backtrace(data("plain_sgd_rank1.gdb.txt"));
  long reduce_pid = gdb_thread_lwp(reduce.back());
  long stalled_pid = gdb_thread_lwp(stalled.back());
  std::vector<RankStacks> ranks = {rank_of(0, reduce_pid, reduce), rank_of(1, stalled_pid, stalled),
                                   rank_of(2, reduce_pid, reduce)};
  EXPECT_EQ(stack_digest(ranks), (std::vector<std::string>{"rank 1: stall <- train <- main",
                                                           "ranks 0,2: ddprun::detail::GlooWork::wait <- train <- main"}));
}

TEST(StackDigest, TorchWorkerWithoutPythonFramesStandsInItsLibraries) {
  // A Python worker run with -I gets native frames only: the innermost frame gdb can name.
  auto sleeping = parse_gdb_backtrace(data("torch_sleep.gdb.txt"));
  auto reducing = parse_gdb_backtrace(data("torch_all_reduce.gdb.txt"));
  std::vector<RankStacks> ranks = {rank_of(0, 3435, reducing), rank_of(1, 3436, sleeping)};
  EXPECT_EQ(stack_digest(ranks), (std::vector<std::string>{"rank 0: c10d::Work::wait", "rank 1: __GI___clock_nanosleep"}));
}

TEST(StackDigest, RanksWithoutStacksSayWhy) {
  RankStacks failed;
  failed.rank = 4;
  failed.error = "gdb: ptrace: Operation not permitted.";
  RankStacks other = failed;
  other.rank = 5;
  auto sleep_py = parse_faulthandler(data("torch_sleep.faulthandler.txt"));
  EXPECT_EQ(stack_digest({failed, other, rank_of(1, 1, {}, sleep_py)}),
            (std::vector<std::string>{"rank 1: hang.py:8", "ranks 4,5: no stacks (gdb: ptrace: Operation not permitted.)"}));
}

TEST(StackDigest, RankLists) {
  EXPECT_EQ(rank_list({}), "");
  EXPECT_EQ(rank_list({3}), "3");
  EXPECT_EQ(rank_list({0, 2, 3}), "0,2,3");
  EXPECT_EQ(rank_list({7, 0, 2, 3, 4, 5}), "0,2-5,7");
  EXPECT_EQ(rank_list({1, 2, 1}), "1,2");
}

TEST(StackDigest, ShortFunctionNames) {
  EXPECT_EQ(short_function_name("(anonymous namespace)::train"), "train");
  EXPECT_EQ(short_function_name("main::{lambda(std::vector<double, std::allocator<double> >&)#1}"), "main::{lambda#1}");
  EXPECT_EQ(short_function_name("c10d::ProcessGroupGloo::AsyncWork::execute(c10::intrusive_ptr<c10d::X> )"),
            "c10d::ProcessGroupGloo::AsyncWork::execute");
  EXPECT_EQ(short_function_name("foo::operator()"), "foo::operator()");
  EXPECT_EQ(short_function_name("std::vector<int>::push_back"), "std::vector::push_back");
}

}  // namespace
}  // namespace ddprun::launcher

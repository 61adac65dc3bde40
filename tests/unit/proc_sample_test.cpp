// A worker's process tree from /proc: the parsers by table over recorded /proc text, the walk over a
// folder laid out as /proc (threads' children lists, a reused pid, a zombie root), and once over
// real processes.
#include "launcher/observe/proc_sample.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

/// A /proc/PID/stat line as Linux 6.1 writes it, with the fields the monitor reads settable.
std::string stat_line(pid_t pid, const std::string& comm, char state, pid_t ppid, int utime, int stime, int cutime,
                      int cstime, unsigned long long starttime, long rss) {
  return std::to_string(pid) + " (" + comm + ") " + state + " " + std::to_string(ppid) + " " +
         std::to_string(pid) + " 25929 0 -1 4194304 103 0 0 0 " + std::to_string(utime) + " " +
         std::to_string(stime) + " " + std::to_string(cutime) + " " + std::to_string(cstime) + " 20 0 1 0 " +
         std::to_string(starttime) + " 3133440 " + std::to_string(rss) +
         " 18446744073709551615 94226094702592 94226094722473 140734043821360 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";
}

TEST(ParseProcStat, ReadsTheFieldsAfterTheLastParenthesis) {
  struct Case {
    std::string text;
    bool parsed;
    ProcStat want;
  };
  const std::vector<Case> cases{
      // Recorded from `cat /proc/self/stat`.
      {"7377 (cat) R 7374 7374 25929 0 -1 4194304 103 0 0 0 0 0 0 0 20 0 1 0 3326686 3133440 380 "
       "18446744073709551615 94226094702592 94226094722473 140734043821360 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 "
       "94226094738480 94226094740096 94226844020736 140734043822534 140734043822554 140734043822554 "
       "140734043824107 0\n",
       true, {7377, 'R', 7374, 0, 0, 0, 0, 3326686, 380}},
      {stat_line(42, "python3", 'S', 1, 150, 20, 7, 3, 999, 5000), true, {42, 'S', 1, 150, 20, 7, 3, 999, 5000}},
      // A command name with spaces and parentheses of its own (a thread named by the program).
      {stat_line(43, "a) (b c) d", 'R', 42, 1, 2, 3, 4, 5, 6), true, {43, 'R', 42, 1, 2, 3, 4, 5, 6}},
      {stat_line(44, "zombie", 'Z', 42, 9, 9, 0, 0, 77, 0), true, {44, 'Z', 42, 9, 9, 0, 0, 77, 0}},
      // Negative child times (signed in the kernel) read as 0.
      {stat_line(45, "odd", 'S', 1, 1, 1, -5, -5, 1, -1), true, {45, 'S', 1, 1, 1, 0, 0, 1, 0}},
      {"", false, {}},
      {"123 no parentheses S 1 2 3", false, {}},
      {"123 (cut) S 1 2 3 4 5", false, {}},
      {"abc (bad pid) " + stat_line(1, "x", 'S', 1, 1, 1, 1, 1, 1, 1).substr(8), false, {}},
      {stat_line(46, "x", 'S', 1, 1, 1, 1, 1, 1, 1).replace(10, 1, "SS"), false, {}},  // a state of two letters
  };
  for (const auto& c : cases) {
    auto stat = parse_proc_stat(c.text);
    ASSERT_EQ(stat.has_value(), c.parsed) << c.text;
    if (!stat) continue;
    EXPECT_EQ(stat->pid, c.want.pid) << c.text;
    EXPECT_EQ(stat->state, c.want.state) << c.text;
    EXPECT_EQ(stat->ppid, c.want.ppid) << c.text;
    EXPECT_EQ(stat->utime, c.want.utime) << c.text;
    EXPECT_EQ(stat->stime, c.want.stime) << c.text;
    EXPECT_EQ(stat->cutime, c.want.cutime) << c.text;
    EXPECT_EQ(stat->cstime, c.want.cstime) << c.text;
    EXPECT_EQ(stat->starttime, c.want.starttime) << c.text;
    EXPECT_EQ(stat->rss_pages, c.want.rss_pages) << c.text;
  }
}

TEST(ParseChildren, ReadsPidsAndSkipsJunk) {
  struct Case {
    std::string text;
    std::vector<pid_t> pids;
  };
  const std::vector<Case> cases{
      {"7466 ", {7466}},  // recorded: the kernel ends each pid with a space
      {"7466 7467 7470 ", {7466, 7467, 7470}},
      {"", {}},
      {"\n", {}},
      {"12 x 13\n", {12, 13}},
      {"-4 0 5", {5}},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_children(c.text), c.pids) << c.text;
}

/// A folder laid out as /proc: PID/stat and PID/task/TID/children.
class FakeProc {
 public:
  explicit FakeProc(const fs::path& root) : root_(root) {}
  void process(pid_t pid, char state, int utime, int stime, unsigned long long starttime, long rss,
               std::vector<pid_t> threads = {}) {
    fs::create_directories(root_ / std::to_string(pid) / "task" / std::to_string(pid));
    write(root_ / std::to_string(pid) / "stat", stat_line(pid, "p" + std::to_string(pid), state, 1, utime, stime, 0, 0, starttime, rss));
    for (pid_t tid : threads) fs::create_directories(root_ / std::to_string(pid) / "task" / std::to_string(tid));
  }
  void children(pid_t pid, pid_t tid, const std::string& text) {
    write(root_ / std::to_string(pid) / "task" / std::to_string(tid) / "children", text);
  }
  void remove(pid_t pid) { fs::remove_all(root_ / std::to_string(pid)); }

 private:
  static void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }
  fs::path root_;
};

TEST(ProcessTree, SumsTheTreeFoundThroughEveryThreadsChildren) {
  testing_support::ScratchFolder scratch("proc_tree");
  FakeProc proc(scratch.root());
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  // 100 (threads 100, 102) -> 101 forked by the main thread, 200 forked by thread 102;
  // 101 -> 300, a zombie (not counted: its times are in 101's once reaped).
  proc.process(100, 'S', 10, 5, 1000, 100, {102});
  proc.process(101, 'R', 20, 0, 1001, 50);
  proc.process(200, 'S', 3, 2, 1002, 10);
  proc.process(300, 'Z', 7, 7, 1003, 0);
  proc.children(100, 100, "101 ");
  proc.children(100, 102, "200 ");
  proc.children(101, 101, "300 ");

  ProcessTree tree(100, scratch.root().string());
  auto first = tree.sample();  // a full scan: every thread's children
  ASSERT_TRUE(first);
  EXPECT_EQ(first->processes, 3);
  EXPECT_EQ(first->cpu_ticks, 15u + 20u + 5u);
  EXPECT_EQ(first->rss_bytes, (100u + 50u + 10u) * page);

  // Between full scans only main threads' lists are read: 200 is still counted, known from the scan.
  proc.process(200, 'S', 13, 2, 1002, 10);
  auto second = tree.sample();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->processes, 3);
  EXPECT_EQ(second->cpu_ticks, 15u + 20u + 15u);

  // 200 exits and its pid is reused by a process outside the tree: not counted.
  proc.process(200, 'S', 500, 500, 5555, 999);
  proc.children(100, 102, "");
  auto third = tree.sample();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->processes, 2);
  EXPECT_EQ(third->cpu_ticks, 15u + 20u);

  // A zombie root: the worker is gone.
  proc.process(100, 'Z', 10, 5, 1000, 0, {102});
  EXPECT_FALSE(tree.sample());
  proc.remove(100);
  EXPECT_FALSE(tree.sample());
}

TEST(ProcessTree, FindsRealDescendants) {
  // sh -> two sleeps: three processes; a grandchild's CPU counts once it burns some.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setpgid(0, 0);  // a group of its own, killed whole at the end
    ::execl("/bin/sh", "sh", "-c", "sleep 30 & sleep 30 & i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; wait", nullptr);
    ::_exit(127);
  }
  ProcessTree tree(child);
  std::optional<TreeSample> sample;
  for (int i = 0; i < 200; ++i) {
    sample = tree.sample();
    if (sample && sample->processes == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(sample);
  EXPECT_EQ(sample->processes, 3);
  EXPECT_GT(sample->rss_bytes, 0u);
  for (int i = 0; i < 300 && sample && sample->cpu_ticks == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    sample = tree.sample();
  }
  ASSERT_TRUE(sample);
  EXPECT_GT(sample->cpu_ticks, 0u);
  ::kill(-child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(tree.sample());
}

}  // namespace
}  // namespace ddprun::launcher

// A console nobody reads (a paused pager, Ctrl-S, a stuck log shipper) must not freeze the agent:
// signals and exits are still acted on, memory stays bounded (the workers wait instead), and a
// console that is read again late gets every line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <set>
#include <thread>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

/// ddprun with its stdout on a pipe whose read end the test holds, and stderr to a file.
struct PipedDdprun {
  pid_t pid = -1;
  int stdout_read = -1;
  std::string stderr_path;
};

/// `stderr_too`: stderr on the same pipe as stdout (`2>&1`) rather than in a file.
PipedDdprun start_piped(const std::vector<std::string>& args, const TempDir& dir, bool stderr_too = false) {
  std::array<int, 2> out{};
  if (::pipe2(out.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  PipedDdprun run;
  run.stderr_path = dir.str() + "/stderr";
  std::vector<std::string> argv_strings{ddprun_binary()};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  run.pid = ::fork();
  if (run.pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    int err = stderr_too ? out[1] : ::open(run.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(err, STDERR_FILENO);
    ::setenv("TMPDIR", dir.str().c_str(), 1);
    std::vector<char*> argv;
    for (auto& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  run.stdout_read = out[0];
  return run;
}

long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

/// Waits for `pid` up to `timeout`; its exit status as 0-255 / 128+N, or -1 (then SIGKILLed).
int wait_exit(pid_t pid, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

}  // namespace

TEST(StalledConsole, SigtermIsActedOnAndMemoryStaysBounded) {
  TempDir dir;
  PipedDdprun run = start_piped({"--standalone", "--nproc-per-node", "2", "--shutdown-timeout", "2",
                                 test_worker_binary(), "flood", "100000000"},
                                dir);
  // The pipe (64 KiB) fills at once; then ddprun's queue, then the workers block. Watch a while.
  long peak = 0;
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    peak = std::max(peak, rss_kib(run.pid));
  }
  EXPECT_LT(peak, 48 * 1024) << "ddprun's memory grew while nobody read its console (KiB)";
  ::kill(run.pid, SIGTERM);
  int status = wait_exit(run.pid, std::chrono::seconds(20));  // grace 2 s + drain 2 s + 1 s, well inside
  ::close(run.stdout_read);
  EXPECT_EQ(status, 128 + SIGTERM) << read_file(run.stderr_path);
}

TEST(StalledConsole, AWorkerFailureIsActedOnWhileTheConsoleIsStalled) {
  TempDir dir;
  // Rank 0 floods the console; rank 1 fails after 1 s. The failure stops rank 0 and is reported at
  // once; ddprun then waits (responsively) for its console to take the last lines, as a paused
  // pager would want, and a signal ends that wait. ("$$$$": ddprun, as torchrun, turns "$$" into "$".)
  PipedDdprun run = start_piped({"--standalone", "--nproc-per-node", "2", "--shutdown-timeout", "2", "sh", "-c",
                                 "if [ \"$RANK\" = 1 ]; then sleep 1; exit 9; fi; echo $$$$ > " + dir.str() +
                                     "/flooder; exec " + test_worker_binary() + " flood 100000000"},
                                dir);
  ASSERT_TRUE(eventually([&] { return read_file(run.stderr_path).find("exitcode  : 9") != std::string::npos; },
                         std::chrono::seconds(30)))
      << read_file(run.stderr_path);
  pid_t flooder = std::stoi(read_file(dir.path() / "flooder"));
  EXPECT_TRUE(eventually([&] { return !process_alive(flooder); }, std::chrono::seconds(10)))
      << "the flooding worker was not stopped";
  ::kill(run.pid, SIGTERM);
  int status = wait_exit(run.pid, std::chrono::seconds(10));
  ::close(run.stdout_read);
  EXPECT_EQ(status, 1) << "the job's status: the signal only cut the last lines short\n"
                       << read_file(run.stderr_path);
}

TEST(StalledConsole, AConsoleReadLateGetsEveryLineWhole) {
  TempDir dir;
  PipedDdprun run = start_piped({"--standalone", "--nproc-per-node", "3", test_worker_binary(), "flood", "50000"},
                                dir);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // stalled: the workers wait
  std::string text;
  std::array<char, 65536> buffer{};
  int reads = 0;
  while (true) {
    ssize_t n = ::read(run.stdout_read, buffer.data(), buffer.size());
    if (n <= 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(n));
    if (++reads % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a slow reader
  }
  ::close(run.stdout_read);
  EXPECT_EQ(wait_exit(run.pid, std::chrono::seconds(60)), 0) << read_file(run.stderr_path);
  auto lines = split_lines(text);
  EXPECT_EQ(lines.size(), 3u * 50000u);
  for (const auto& line : lines) {
    ASSERT_TRUE(line.starts_with("rank=") && line.ends_with(" end")) << "a torn line: " << line.substr(0, 200);
  }
  std::set<std::string> distinct(lines.begin(), lines.end());
  EXPECT_EQ(distinct.size(), lines.size()) << "lines were torn or repeated";
}

// `ddprun ... 2>&1 | slow-reader`: both streams on one pipe that fills; a partial write of one
// stream's batch must be finished before the other stream's lines go in.
TEST(StalledConsole, StdoutAndStderrOnOneSlowPipeNeverTear) {
  TempDir dir;
  const std::string flood = test_worker_binary() + " flood 20000";
  PipedDdprun run = start_piped({"--standalone", "--nproc-per-node", "2", "sh", "-c",
                                 flood + " & " + flood + " >&2; wait"},
                                dir, /*stderr_too=*/true);
  std::string text;
  std::array<char, 4096> buffer{};  // small reads: the pipe stays nearly full, writes stay partial
  int reads = 0;
  while (true) {
    ssize_t n = ::read(run.stdout_read, buffer.data(), buffer.size());
    if (n <= 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(n));
    if (++reads % 200 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::close(run.stdout_read);
  EXPECT_EQ(wait_exit(run.pid, std::chrono::seconds(60)), 0);
  std::size_t worker_lines = 0;
  for (const auto& line : split_lines(text)) {
    if (line.starts_with("ddprun: ")) continue;
    ASSERT_TRUE(line.starts_with("rank=") && line.ends_with(" end")) << "a torn line: " << line.substr(0, 200);
    ++worker_lines;
  }
  EXPECT_EQ(worker_lines, 2u * 2u * 20000u);
}

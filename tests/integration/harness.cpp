#include "harness.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../support/free_port.hpp"

extern char** environ;

namespace ddprun::testing {

std::string ddprun_binary() { return DDPRUN_BINARY; }
std::string test_worker_binary() { return TEST_WORKER_BINARY; }
std::string hello_ranks_binary() { return HELLO_RANKS_BINARY; }
std::string ddprun_store_binary() { return DDPRUN_STORE_BINARY; }
std::string examples_dir() { return EXAMPLES_DIR; }

namespace {

std::vector<std::string> with_ddprun(const std::vector<std::string>& args) {
  std::vector<std::string> argv{ddprun_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

Launch::Launch(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env,
               const std::vector<std::string>& unset_env)
    : Launch(Command{with_ddprun(args)}, extra_env, unset_env) {}

Launch::Launch(const Command& command, const std::map<std::string, std::string>& extra_env,
               const std::vector<std::string>& unset_env) {
  std::array<int, 2> out{};
  std::array<int, 2> err{};
  if (::pipe2(out.data(), O_CLOEXEC) != 0 || ::pipe2(err.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe");

  std::vector<std::string> env_strings;
  for (char** e = ::environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool dropped = extra_env.contains(name);
    for (const auto& u : unset_env) dropped = dropped || u == name;
    if (!dropped) env_strings.push_back(entry);
  }
  for (const auto& [name, value] : extra_env) env_strings.push_back(name + "=" + value);
  if (!extra_env.contains("TMPDIR")) {
    std::erase_if(env_strings, [](const std::string& e) { return e.rfind("TMPDIR=", 0) == 0; });
    env_strings.push_back("TMPDIR=" + tmp_.str());
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> argv_strings = command.argv;
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, STDIN_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

Launch::~Launch() {
  if (!waited_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

void Launch::send(int signo) const { ::kill(pid_, signo); }

Outcome Launch::wait(std::chrono::milliseconds timeout) {
  Outcome outcome;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<pollfd, 2> fds{{{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}}};
  std::array<std::string*, 2> sinks{&outcome.out, &outcome.err};
  int open_streams = 2;
  std::array<char, 65536> buffer{};
  while (open_streams > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ADD_FAILURE() << "ddprun did not finish within " << timeout.count() << " ms";
      ::kill(pid_, SIGKILL);
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      timeout = std::chrono::seconds(5);
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(left.count(), 1))) < 0) continue;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (n > 0) {
        sinks[i]->append(buffer.data(), static_cast<std::size_t>(n));
      } else {
        fds[i].fd = -1;
        --open_streams;
      }
    }
  }
  int status = 0;
  ::waitpid(pid_, &status, 0);
  waited_ = true;
  outcome.exit_status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return outcome;
}

Outcome run_ddprun(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env) {
  Launch launch(args, extra_env);
  return launch.wait();
}

Outcome run_ddprun_via(const std::vector<std::string>& argv) {
  Launch launch(Launch::Command{argv});
  return launch.wait();
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "ddprun_test_XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

bool eventually(const std::function<bool()>& predicate, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return predicate();
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::map<std::string, std::string> parse_env_file(const std::filesystem::path& path) {
  std::map<std::string, std::string> env;
  for (const auto& line : split_lines(read_file(path))) {
    auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

std::vector<std::string> one_node_job_flags(bool multi_node) {
  if (!multi_node) return {"--standalone"};
  return {"--nnodes=1:2", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:" + std::to_string(free_port()),
          "--rdzv-conf=last_call_timeout=0.2,join_timeout=30"};
}

std::filesystem::path only_run_folder(const TempDir& logs) {
  std::vector<std::filesystem::path> runs(std::filesystem::directory_iterator(logs.path()), {});
  EXPECT_EQ(runs.size(), 1U);
  return runs.empty() ? std::filesystem::path() : runs[0];
}

std::vector<pid_t> processes_with_argument(const std::string& needle) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(entry.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos) found.push_back(std::stoi(name));
  }
  return found;
}

bool process_alive(pid_t pid) {
  // A zombie is dead for our purpose: read its state rather than trusting kill(pid, 0).
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

}  // namespace ddprun::testing

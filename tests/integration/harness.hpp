#pragma once
/// Test harness: runs the real ddprun binary as a child process and collects what it did.
#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ddprun::testing {

/// Paths of the binaries under test (set by CMake).
std::string ddprun_binary();
std::string test_worker_binary();
std::string hello_ranks_binary();
std::string ddprun_store_binary();
std::string examples_dir();
/// Debian's interpreter, the one with python3-torch (the default python3 may be another).
inline const char* kSystemPython = "/usr/bin/python3";

struct Outcome {
  int exit_status = -1;  ///< exit code, or 128+N when ddprun died of signal N
  std::string out;
  std::string err;
};

/// A fresh folder, removed when the object goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

/// A private XDG_RUNTIME_DIR (mode 0700, as the run registry wants it), so that the registry
/// holds this test's jobs only and `ddprun status` / `ddprun stacks` find them alone.
class RuntimeDir {
 public:
  RuntimeDir() { ::chmod(dir_.path().c_str(), 0700); }
  std::string str() const { return dir_.str(); }

 private:
  TempDir dir_;
};

/// A ddprun process started in the background; its stdout and stderr are collected on wait().
/// It gets a TMPDIR of its own, so the log folders of failed runs go when the Launch goes.
class Launch {
 public:
  /// Runs `ddprun args...`.
  explicit Launch(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env = {},
                  const std::vector<std::string>& unset_env = {});
  /// Runs `argv` as given (e.g. a shell that sets ddprun up, then execs it).
  struct Command {
    std::vector<std::string> argv;
  };
  explicit Launch(const Command& command, const std::map<std::string, std::string>& extra_env = {},
                  const std::vector<std::string>& unset_env = {});
  ~Launch();
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  pid_t pid() const { return pid_; }
  void send(int signo) const;
  /// Waits up to `timeout` for ddprun to exit (SIGKILLing it past that, failing the test).
  Outcome wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));

 private:
  TempDir tmp_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool waited_ = false;
};

/// Runs ddprun to its end.
Outcome run_ddprun(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env = {});
/// Runs `argv` (which execs ddprun in the end) to its end.
Outcome run_ddprun_via(const std::vector<std::string>& argv);

/// The flags of a job on this node alone: `--standalone`, or (multi_node) a c10d agent that may be
/// joined by one more node (--nnodes=1:2) and so runs rendezvous rounds, on a free loopback port.
std::vector<std::string> one_node_job_flags(bool multi_node);

/// Waits until `predicate` holds, up to `timeout`; returns whether it did.
bool eventually(const std::function<bool()>& predicate, std::chrono::milliseconds timeout = std::chrono::seconds(20));

std::string read_file(const std::filesystem::path& path);
/// KEY=VALUE lines as a map.
std::map<std::string, std::string> parse_env_file(const std::filesystem::path& path);
bool process_alive(pid_t pid);
/// The processes (of this machine, any namespace's) whose command line holds `needle`, its
/// arguments joined by spaces: a test's unique argument, or a secret that must be on none.
std::vector<pid_t> processes_with_argument(const std::string& needle);
std::vector<std::string> split_lines(const std::string& text);
/// The one run folder (<run_id>_<random>) a job made under --log-dir `logs`; fails the test (and
/// gives an empty path) when there is not exactly one.
std::filesystem::path only_run_folder(const TempDir& logs);

}  // namespace ddprun::testing

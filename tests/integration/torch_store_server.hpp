#pragma once
// TorchStoreServer: PyTorch 1.13's TCPStore server (Debian's python3-torch, the store torchrun 1.13
// gives its workers) in a child process, for the clients' legacy-dialect tests.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "harness.hpp"

namespace ddprun::testing {

/// A TCPStore server in Debian's Python: prints its port; for each line "get K" on stdin it prints
/// the value of K (waiting for it) and sets "from-python" to "42"; ends when stdin closes.
inline constexpr const char* kTorchStoreScript = R"(
import datetime, sys
from torch.distributed import TCPStore
store = TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=30), wait_for_workers=False)
print(store.port, flush=True)
for line in sys.stdin:
    if line.startswith("get "):
        print(store.get(line[4:].strip()).decode(), flush=True)
        store.set("from-python", "42")
)";

/// The Python server as a child process, killed when the object goes.
class TorchStoreServer {
 public:
  TorchStoreServer() {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      execl(ddprun::testing::kSystemPython, "python3", "-c", kTorchStoreScript, static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    stdin_ = to_child[1];
    stdout_ = from_child[0];
    std::string line = read_line(std::chrono::seconds(60));  // importing torch takes a few seconds
    if (!line.empty()) port_ = std::stoi(line);
  }
  ~TorchStoreServer() {
    close(stdin_);
    close(stdout_);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  /// 0 when the server did not start (no torch).
  int port() const { return port_; }
  /// Asks the Python side for `key` (as a 1.13 client's get) and returns what it printed.
  std::string python_get(const std::string& key) {
    std::string request = "get " + key + "\n";
    if (write(stdin_, request.data(), request.size()) != static_cast<ssize_t>(request.size())) return "";
    return read_line(std::chrono::seconds(20));
  }

 private:
  std::string read_line(std::chrono::milliseconds timeout) {
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char c = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd fd{stdout_, POLLIN, 0};
      if (poll(&fd, 1, 100) <= 0) continue;
      if (read(stdout_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line += c;
    }
    return "";
  }

  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  int port_ = 0;
};

/// Starts `server`, or skips the test with the reason when /usr/bin/python3 cannot import torch.
#define START_TORCH_STORE(server)                                                                    \
  ::ddprun::testing::TorchStoreServer server;                                                        \
  if ((server).port() == 0) GTEST_SKIP() << "/usr/bin/python3 cannot start torch.distributed.TCPStore " \
                                            "(Debian's python3-torch is needed)"

}  // namespace ddprun::testing

#pragma once
// ddprun run on a pseudo-terminal of the test's own (forkpty), as a user at a terminal runs it:
// keys typed into the pty, the window resized, what ddprun wrote read back. Shared by the terminal
// and warm-start tests.
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness.hpp"

namespace ddprun::testing {

/// ddprun started on a pseudo-terminal of its own (its stdin, stdout and stderr), 120x40.
class PtyLaunch {
 public:
  /// Runs `ddprun args...`.
  explicit PtyLaunch(const std::vector<std::string>& args) : PtyLaunch(with_ddprun(args), as_given) {}
  /// Runs `argv` as given (a wrapper that execs ddprun in the end), with `env` added to the test's.
  struct AsGiven {};
  static constexpr AsGiven as_given{};
  PtyLaunch(std::vector<std::string> argv, AsGiven, const std::map<std::string, std::string>& env = {})
      : initial_(users_mode()) {
    winsize size{};
    size.ws_row = 40;
    size.ws_col = 120;
    // The terminal gets its mode before ddprun runs: read after the fork, it could already be
    // ddprun's forwarding mode on a crowded machine.
    pid_ = ::forkpty(&master_, nullptr, &initial_, &size);
    if (pid_ == 0) {
      ::setenv("TMPDIR", tmp_.str().c_str(), 1);
      ::setenv("TERM", "xterm", 1);
      ::setenv("NO_COLOR", "1", 1);
      for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
      std::vector<char*> raw;
      for (auto& arg : argv) raw.push_back(arg.data());
      raw.push_back(nullptr);
      ::execvp(raw[0], raw.data());
      ::_exit(127);
    }
    if (pid_ < 0) throw std::runtime_error("forkpty failed");
  }
  PtyLaunch(const PtyLaunch&) = delete;
  PtyLaunch& operator=(const PtyLaunch&) = delete;
  ~PtyLaunch() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(master_);
  }

  /// A terminal as users have (the kernel's default for a new pty), but for "\n" -> "\r\n" on
  /// output: the test reads the bytes as written.
  static termios users_mode() {
    int master = -1, slave = -1;
    termios mode{};
    if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) throw std::runtime_error("openpty failed");
    ::tcgetattr(slave, &mode);
    ::close(slave);
    ::close(master);
    mode.c_oflag &= ~static_cast<tcflag_t>(OPOST);
    return mode;
  }

  /// Reads what ddprun wrote until `text` appears (after `from`); whether it did within `timeout`.
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout = std::chrono::seconds(20), std::size_t from = 0) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (output_.find(text, from) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline || !read_some(100)) return false;
    }
    return true;
  }
  /// The terminal's mode as it was handed to ddprun.
  const termios& initial_mode() const { return initial_; }
  /// For a failure message: who the terminal's foreground is, its ISIG, and ddprun's signal state.
  std::string describe_signals() {
    const termios now = mode();
    std::string text = "terminal foreground pgrp " + std::to_string(::tcgetpgrp(master_)) + ", ddprun pid " +
                       std::to_string(pid_) + " pgid " + std::to_string(::getpgid(pid_)) +
                       ", ISIG " + ((now.c_lflag & ISIG) ? "on" : "off") + "; ddprun's";
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.starts_with("Sig") || line.starts_with("ShdPnd")) text += " " + line;
    }
    return text;
  }
  void type(const std::string& keys) { ASSERT_EQ(::write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size())); }
  bool running() {
    if (exited_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      status_ = status;
    }
    return !exited_;
  }
  /// Reads until ddprun has exited and its terminal is closed; its exit status (128+N by signal N).
  int wait_exit(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline && read_some(100)) {
    }
    if (!exited_) {
      if (std::chrono::steady_clock::now() >= deadline) ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
      exited_ = true;
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  /// The terminal is resized, as a user resizes a window (the kernel sends ddprun SIGWINCH).
  void resize(unsigned short rows, unsigned short columns) {
    winsize size{};
    size.ws_row = rows;
    size.ws_col = columns;
    ::ioctl(master_, TIOCSWINSZ, &size);
  }
  termios mode() const {
    termios t{};
    ::tcgetattr(master_, &t);  // a pty master reports its slave's settings
    return t;
  }
  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }

 private:
  static std::vector<std::string> with_ddprun(const std::vector<std::string>& args) {
    std::vector<std::string> argv{ddprun_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  /// One poll and read; false at the end of the terminal's output (EIO: every slave closed).
  bool read_some(int timeout_ms) {
    pollfd pfd{master_, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) <= 0) return !exited_ || (pfd.revents & POLLIN) != 0 || running();
    char buffer[4096];
    ssize_t n = ::read(master_, buffer, sizeof buffer);
    if (n <= 0) return false;
    output_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  TempDir tmp_;
  int master_ = -1;
  termios initial_{};
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::string output_;
};

}  // namespace ddprun::testing

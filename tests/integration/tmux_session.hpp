#pragma once
// A tmux session of its own (its own server), 100x40, running a command: the terminal that the
// terminal and status tests read back with capture-pane and type into with send-keys.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "harness.hpp"

namespace ddprun::testing {

class Tmux {
 public:
  explicit Tmux(const std::string& command)
      : tmux_("tmux -L ddprun_test_" + std::to_string(::getpid()) + "_" + std::to_string(++sessions_) + " -f /dev/null ") {
    std::string quoted = "'";
    for (char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    quoted += "'";
    started_ = std::system((tmux_ + "new-session -d -x 100 -y 40 " + quoted).c_str()) == 0;
  }
  ~Tmux() { std::system((tmux_ + "kill-server 2>/dev/null").c_str()); }
  Tmux(const Tmux&) = delete;
  Tmux& operator=(const Tmux&) = delete;

  bool started() const { return started_; }
  /// The screen as tmux shows it; with `escapes`, its colours as SGR sequences too.
  std::string screen(bool escapes = false) const {
    std::string text;
    FILE* pipe = ::popen((tmux_ + "capture-pane -p" + (escapes ? " -e" : "")).c_str(), "r");
    if (pipe == nullptr) return text;
    char buffer[4096];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) text.append(buffer, n);
    ::pclose(pipe);
    return text;
  }
  /// Until the screen `shows` what is wanted, or `timeout`.
  bool wait_for(const std::function<bool(const std::string&)>& shows,
                std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    return eventually([&] { return shows(screen()); }, timeout);
  }
  /// Until `text` is on the screen, or `timeout`.
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    return wait_for([&](const std::string& shown) { return shown.find(text) != std::string::npos; }, timeout);
  }
  /// Types `keys` (tmux key names, e.g. "Enter", or literal text with `literal`).
  void keys(const std::string& keys, bool literal = false) const {
    std::system((tmux_ + "send-keys " + (literal ? "-l " : "") + "'" + keys + "'").c_str());
  }

 private:
  static inline int sessions_ = 0;
  std::string tmux_;
  bool started_ = false;
};

}  // namespace ddprun::testing

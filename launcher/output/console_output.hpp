#pragma once
/// ConsoleOutput: ddprun's stdout and stderr as ConsoleWriters, installed as the process's console
/// while the agent's loop runs, so that ddprun's own lines (print_line) queue behind the workers'
/// instead of blocking the loop. Before and after, ddprun's lines are written directly.
#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "launcher/output/console_writer.hpp"

namespace ddprun::launcher {

class ConsoleOutput {
 public:
  explicit ConsoleOutput(boost::asio::io_context& io);
  ~ConsoleOutput();  ///< uninstalls
  ConsoleOutput(const ConsoleOutput&) = delete;
  ConsoleOutput& operator=(const ConsoleOutput&) = delete;

  ConsoleWriter& out() { return out_; }
  /// Where stderr lines go: stdout's writer when both are the same file (`2>&1`, one terminal), so
  /// that a partial write to a slow pipe is finished before the other stream's lines go in.
  ConsoleWriter& err() { return err_ ? *err_ : out_; }
  bool drained() const { return out_.drained() && (!err_ || err_->drained()); }
  /// Calls `done` once, on the loop, when both have written everything queued.
  void when_drained(std::function<void()> done);

 private:
  ConsoleWriter out_;
  std::unique_ptr<ConsoleWriter> err_;  ///< null when stderr is the same file as stdout
};

/// Writes `text` to ddprun's stderr: through the installed ConsoleOutput when there is one (never
/// blocking), directly otherwise.
void write_stderr(std::string_view text);

/// One line of ddprun's own on stderr, prefixed so that it stands out among the workers' lines.
inline void print_line(const std::string& text) { write_stderr("ddprun: " + text + "\n"); }

}  // namespace ddprun::launcher

#pragma once
/// LineSplitter: turns the chunks read from a pipe into whole lines, so that the output of
/// different workers is interleaved line by line and never within a line.
#include <cstddef>
#include <string>
#include <string_view>

namespace ddprun::launcher {

class LineSplitter {
 public:
  /// A line longer than `max_line_bytes` without a newline is passed on in pieces of that size:
  /// the bound keeps a worker that never prints '\n' from growing ddprun's memory.
  explicit LineSplitter(std::size_t max_line_bytes = 1 << 20) : max_line_bytes_(max_line_bytes) {}

  /// Calls `on_line(line)` (without its '\n') for every line that `chunk` completes.
  template <class OnLine>
  void feed(std::string_view chunk, OnLine&& on_line) {
    while (!chunk.empty()) {
      auto newline = chunk.find('\n');
      if (newline == std::string_view::npos) {
        append_partial(chunk, on_line);
        return;
      }
      std::string_view head = chunk.substr(0, newline);
      if (pending_.empty()) {
        on_line(head);  // the common case: no copy
      } else {
        pending_.append(head);
        on_line(std::string_view(pending_));
        pending_.clear();
      }
      chunk.remove_prefix(newline + 1);
    }
  }

  /// The line begun and not yet ended (what a prompt or a `\r`-updated progress bar shows now).
  std::string_view pending() const { return pending_; }

  /// Forgets what the begun line showed before its last carriage return that is followed by more
  /// text: a progress bar that never ends its line then costs one frame of memory, not the run's
  /// frames. Only for lines whose raw bytes nobody keeps (no log file).
  void drop_overwritten() {
    auto cr = pending_.find_last_of('\r');
    if (cr != std::string::npos && cr + 1 < pending_.size()) pending_.erase(0, cr + 1);
  }

  /// End of stream: a last line without '\n' is passed on as a line.
  template <class OnLine>
  void finish(OnLine&& on_line) {
    if (!pending_.empty()) on_line(std::string_view(pending_));
    pending_.clear();
  }

 private:
  template <class OnLine>
  void append_partial(std::string_view piece, OnLine& on_line) {
    while (pending_.size() + piece.size() >= max_line_bytes_) {
      std::size_t take = max_line_bytes_ - pending_.size();
      pending_.append(piece.substr(0, take));
      on_line(std::string_view(pending_));
      pending_.clear();
      piece.remove_prefix(take);
    }
    pending_.append(piece);
  }

  std::size_t max_line_bytes_;
  std::string pending_;
};

}  // namespace ddprun::launcher

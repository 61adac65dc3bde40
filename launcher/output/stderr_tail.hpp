#pragma once
/// The last lines a worker wrote to stderr, kept so that the failure summary can show them when the
/// worker left no error file.
#include <cstddef>
#include <deque>
#include <string>
#include <string_view>

namespace ddprun::launcher {

/// Keeps the last `max_lines` complete lines, and at most `max_bytes` in all, of a stream fed in whole
/// lines: memory stays bounded however much a worker writes.
class StderrTail {
 public:
  StderrTail(std::size_t max_lines = 20, std::size_t max_bytes = 8192);

  /// Adds one line, given without its '\n'. What a terminal would overwrite is dropped: a trailing
  /// '\r' and everything up to the last '\r' (progress bars redraw with '\r'). A line longer than
  /// `max_bytes` keeps its beginning, cut on a UTF-8 character boundary, and ends with kCutMark.
  void add_line(std::string_view line_without_newline);

  /// The kept lines joined with '\n' (no '\n' after the last); never longer than `max_bytes`.
  std::string text() const;

  void clear();

  /// Ends a line that was cut to fit `max_bytes`.
  static constexpr std::string_view kCutMark = " [...]";

 private:
  void drop_oldest();

  std::size_t max_lines_;
  std::size_t max_bytes_;
  std::deque<std::string> lines_;
  std::size_t text_bytes_ = 0;  ///< text().size(), kept up to date to avoid rebuilding the text
};

}  // namespace ddprun::launcher

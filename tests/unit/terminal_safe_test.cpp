// Worker text shown in the failure summary or the status block cannot drive the terminal and is
// bounded.
#include "launcher/base/terminal_safe.hpp"

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

TEST(TerminalSafe, ShowsControlCharactersInCaretNotation) {
  struct Case {
    std::string input;
    std::string expected;
  };
  const Case cases[] = {
      {"plain text", "plain text"},
      {"line\nnext\ttab", "line\nnext\ttab"},
      {"\x1b[2J\x1b]0;title\x07", "^[[2J^[]0;title^G"},
      {"crlf\r\nend", "crlf\nend"},
      {std::string("nul\0here", 8), "nul^@here"},
      {"del\x7f", "del^?"},
      {"caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93"},
  };
  for (const auto& c : cases) EXPECT_EQ(terminal_safe(c.input), c.expected) << c.input;
}

TEST(TerminalSafe, OnOneLineBreaksAndTabsAreSpaces) {
  struct Case {
    std::string input;
    std::string expected;
  };
  const Case cases[] = {
      {"plain text", "plain text"},
      {"line\nnext\ttab", "line next tab"},
      {"\x1b[31mred, no reset", "^[[31mred, no reset"},
      {"crlf\r\nend", "crlf end"},
      {"caf\xc3\xa9", "caf\xc3\xa9"},
  };
  for (const auto& c : cases) EXPECT_EQ(terminal_safe_line(c.input), c.expected) << c.input;
}

TEST(TerminalSafe, KeepsTheLastLinesWithinBothBounds) {
  struct Case {
    std::string input;
    std::size_t max_lines;
    std::size_t max_bytes;
    std::string expected;
    std::size_t omitted;
  };
  const Case cases[] = {
      {"a\nb\nc", 10, 100, "a\nb\nc", 0},
      {"a\nb\nc", 2, 100, "b\nc", 1},
      {"aaaa\nbbbb\ncccc", 10, 10, "bbbb\ncccc", 1},
      {"short\n" + std::string(50, 'x'), 10, 20, std::string(20, 'x') + "...", 1},
      {"", 3, 10, "", 0},
  };
  for (const auto& c : cases) {
    Excerpt excerpt = last_lines(c.input, c.max_lines, c.max_bytes);
    EXPECT_EQ(excerpt.text, c.expected) << c.input;
    EXPECT_EQ(excerpt.omitted, c.omitted) << c.input;
  }
}

}  // namespace
}  // namespace ddprun::launcher

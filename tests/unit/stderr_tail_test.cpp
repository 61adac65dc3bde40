#include "launcher/output/stderr_tail.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace ddprun::launcher {
namespace {

TEST(StderrTail, EmptyUntilFed) { EXPECT_EQ(StderrTail().text(), ""); }

TEST(StderrTail, KeepsTheLastLines) {
  StderrTail tail(3, 1000);
  for (int i = 1; i <= 10; ++i) tail.add_line("line " + std::to_string(i));
  EXPECT_EQ(tail.text(), "line 8\nline 9\nline 10");
}

TEST(StderrTail, KeepsEmptyLines) {
  StderrTail tail(3, 1000);
  tail.add_line("a");
  tail.add_line("");
  tail.add_line("b");
  EXPECT_EQ(tail.text(), "a\n\nb");
}

TEST(StderrTail, KeepsAtMostMaxBytesCountingTheSeparators) {
  StderrTail tail(100, 10);
  tail.add_line("aaaa");
  tail.add_line("bbbb");  // "aaaa\nbbbb" is 9 bytes
  EXPECT_EQ(tail.text(), "aaaa\nbbbb");
  tail.add_line("c");  // 11 bytes with "aaaa": drop it
  EXPECT_EQ(tail.text(), "bbbb\nc");
  tail.add_line("ddddddddd");  // 9 bytes: only it fits
  EXPECT_EQ(tail.text(), "ddddddddd");
}

TEST(StderrTail, StaysWithinBothBoundsUnderAFlood) {
  StderrTail tail(20, 200);
  for (int i = 0; i < 100000; ++i) tail.add_line(std::string(static_cast<std::size_t>(i % 37), 'x'));
  std::string text = tail.text();
  EXPECT_LE(text.size(), 200U);
  EXPECT_LE(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')), 19U);
  EXPECT_TRUE(text.ends_with(std::string(99999 % 37, 'x')));
}

TEST(StderrTail, CutsASingleHugeLineKeepingItsBeginning) {
  StderrTail tail(20, 64);
  tail.add_line("earlier");
  tail.add_line("RuntimeError: " + std::string(1'000'000, 'y'));
  std::string text = tail.text();
  EXPECT_EQ(text.size(), 64U);
  EXPECT_TRUE(text.starts_with("RuntimeError: yyy"));
  EXPECT_TRUE(text.ends_with(StderrTail::kCutMark));
}

TEST(StderrTail, CutsOnACharacterBoundary) {
  StderrTail tail(20, 5 + StderrTail::kCutMark.size());
  std::string e_acute = "\xC3\xA9";
  std::string line = "ab";
  for (int i = 0; i < 10; ++i) line += e_acute;
  tail.add_line(line);  // a cut at 5 bytes would split the second é
  EXPECT_EQ(tail.text(), "ab" + e_acute + std::string(StderrTail::kCutMark));
}

TEST(StderrTail, BoundSmallerThanTheCutMarkStillHolds) {
  StderrTail tail(20, 3);
  tail.add_line("abcdef");
  EXPECT_EQ(tail.text(), "abc");
}

TEST(StderrTail, ZeroBoundsKeepNothing) {
  StderrTail no_lines(0, 100);
  no_lines.add_line("x");
  EXPECT_EQ(no_lines.text(), "");
  StderrTail no_bytes(5, 0);
  no_bytes.add_line("x");
  EXPECT_EQ(no_bytes.text(), "");
}

TEST(StderrTail, KeepsWhatATerminalShowsOfCarriageReturns) {
  StderrTail tail;
  tail.add_line(" 10%|#   |\r 20%|##  |\rTraceback (most recent call last):");
  tail.add_line("ValueError: boom\r");
  EXPECT_EQ(tail.text(), "Traceback (most recent call last):\nValueError: boom");
}

TEST(StderrTail, ClearForgetsEverything) {
  StderrTail tail(3, 10);
  tail.add_line("aaaa");
  tail.add_line("bbbb");
  tail.clear();
  EXPECT_EQ(tail.text(), "");
  tail.add_line("cccc");
  tail.add_line("dddd");
  EXPECT_EQ(tail.text(), "cccc\ndddd");  // the byte count was reset too
}

}  // namespace
}  // namespace ddprun::launcher

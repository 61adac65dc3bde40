// The live region's rendering: pure functions, checked by table.
#include "launcher/output/live_region.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ddprun::launcher {
namespace {

TEST(LastFrame, ShowsWhatTheLineShowsInTheEnd) {
  struct Case {
    std::string line;
    std::string shown;
  };
  const std::vector<Case> cases{
      {"plain", "plain"},
      {"", ""},
      {"\rbar 1/3\rbar 2/3\rbar 3/3", "bar 3/3"},
      {"crlf line\r", "crlf line"},
      {"a\rb\r", "b"},
      {"\r", ""},
      {"10%|#  |\r100%|###|\r\r", "100%|###|"},
  };
  for (const auto& c : cases) EXPECT_EQ(std::string(last_frame(c.line)), c.shown) << c.line;
}

TEST(FitToWidth, CutsAtTheWidthKeepingEscapesWhole) {
  struct Case {
    std::string text;
    std::size_t columns;
    std::string fitted;
  };
  const std::vector<Case> cases{
      {"abcdef", 10, "abcdef"},
      {"abcdef", 3, "abc"},
      {"\x1b[32mabcdef\x1b[0m", 3, "\x1b[32mabc\x1b[0m"},
      {"\x1b[32mab\x1b[0m", 2, "\x1b[32mab\x1b[0m"},
      {"\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88", 2, "\xe2\x96\x88\xe2\x96\x88"},
      {"tab\there\x07", 20, "tabhere"},  // control characters would move the cursor
      {"\x1b[Aup\x1b[2Kline\x1b]0;title\a", 20, "upline"},  // so would these sequences
      {"\x1b[36m[default0]:\x1b[0mbar", 12, "\x1b[36m[default0]:\x1b[0mb\x1b[0m"},  // escapes take no column
  };
  for (const auto& c : cases) EXPECT_EQ(fit_to_width(c.text, c.columns), c.fitted) << c.text;
}

TEST(RenderFrame, TakesTheRegionBackPrintsLinesAboveAndRedraws) {
  struct Case {
    std::size_t shown;
    std::string complete;
    std::vector<std::string> live;
    std::string bytes;
  };
  const std::vector<Case> cases{
      // Nothing live: the lines as they are.
      {0, "[1]:a\n", {}, "[1]:a\n"},
      // A first live line: drawn without a newline, the cursor stays at its end.
      {0, "", {"[0]:bar 1/3"}, "[0]:bar 1/3"},
      // Redrawn in place.
      {1, "", {"[0]:bar 2/3"}, "\r\x1b[J[0]:bar 2/3"},
      // Another rank's line goes above the live line, which is drawn again below it.
      {1, "[1]:line 1\n", {"[0]:bar 2/3"}, "\r\x1b[J[1]:line 1\n[0]:bar 2/3"},
      // Two live lines: back one line up, then clear to the end of the screen.
      {2, "", {"[0]:a", "[1]:b"}, "\r\x1b[1A\x1b[J[0]:a\n[1]:b"},
      {3, "x\n", {"[2]:c"}, "\r\x1b[2A\x1b[Jx\n[2]:c"},
      // The line ends: the region is taken back and nothing is left live.
      {1, "[0]:bar 3/3\n", {}, "\r\x1b[J[0]:bar 3/3\n"},
  };
  for (const auto& c : cases) EXPECT_EQ(render_frame(c.shown, c.complete, c.live), c.bytes) << c.complete;
}

TEST(FitToRows, KeepsARowForCompleteLines) {
  std::vector<std::string> three{"a", "b", "c"};
  EXPECT_EQ(fit_to_rows(three, 24), three);
  EXPECT_EQ(fit_to_rows(three, 4), three);
  EXPECT_EQ(fit_to_rows(three, 3), (std::vector<std::string>{"a", "... 2 more live lines"}));
  EXPECT_EQ(fit_to_rows(three, 1), (std::vector<std::string>{"... 3 more live lines"}));
}

}  // namespace
}  // namespace ddprun::launcher

// --preload's value: dotted Python module names, comma-separated.
#include "launcher/cli/preload_list.hpp"

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

TEST(PreloadList, NamesOrWhyNot) {
  using Names = std::vector<std::string>;
  const struct {
    std::string text;
    Names modules;
    std::string error;
  } rows[] = {
      {"torch", {"torch"}, ""},
      {"torch,transformers", {"torch", "transformers"}, ""},
      {"torch.distributed,_private,a1.b_2", {"torch.distributed", "_private", "a1.b_2"}, ""},
      {"", {}, "names no module"},
      {"torch,", {}, "has an empty entry"},
      {"a,,b", {}, "has an empty entry"},
      {",torch", {}, "has an empty entry"},
      {"torch .nn", {}, "has \"torch .nn\", which is not a module name"},
      {"1torch", {}, "has \"1torch\", which is not a module name"},
      {"torch..nn", {}, "has \"torch..nn\", which is not a module name"},
      {"torch.", {}, "has \"torch.\", which is not a module name"},
      {"os;import sys", {}, "has \"os;import sys\", which is not a module name"},
      {"caf\xc3\xa9", {}, "has \"caf\xc3\xa9\", which is not a module name"},
      {"a\x1b[31m", {}, "has \"a\\x1b[31m\", which is not a module name"},  // quoted, never raw to a terminal
  };
  for (const auto& row : rows) {
    const PreloadList list = parse_preload_list(row.text);
    EXPECT_EQ(list.modules, row.modules) << row.text;
    EXPECT_EQ(list.error, row.error) << row.text;
  }
}

}  // namespace
}  // namespace ddprun::launcher

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
      {"torch .nn", {}, "'torch .nn' is not a module name"},
      {"1torch", {}, "'1torch' is not a module name"},
      {"torch..nn", {}, "'torch..nn' is not a module name"},
      {"torch.", {}, "'torch.' is not a module name"},
      {"os;import sys", {}, "'os;import sys' is not a module name"},
      {"caf\xc3\xa9", {}, "'caf\xc3\xa9' is not a module name"},
  };
  for (const auto& row : rows) {
    const PreloadList list = parse_preload_list(row.text);
    EXPECT_EQ(list.modules, row.modules) << row.text;
    EXPECT_EQ(list.error, row.error) << row.text;
  }
}

}  // namespace
}  // namespace ddprun::launcher

// parse_command_line: --events FILE (issue 13's event log), by table.
#include <gtest/gtest.h>

#include "cli_parse.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

TEST(CliEvents, TheFileAsGivenOrNone) {
  struct Case {
    Args args;
    Environ env;
    std::string file;
  };
  const Case cases[] = {
      {{"t.py"}, kNoPath, ""},
      {{"--events", "ev.jsonl", "t.py"}, kNoPath, "ev.jsonl"},
      {{"--events=/tmp/a b.jsonl", "t.py"}, kNoPath, "/tmp/a b.jsonl"},
      {{"--events", "/dev/stderr", "t.py"}, kNoPath, "/dev/stderr"},
      {{"t.py"}, {{"PATH", "/nonexistent/ddprun"}, {"PET_EVENTS", "from-env.jsonl"}}, "from-env.jsonl"},
      {{"--events", "cli.jsonl", "t.py"}, {{"PATH", "/nonexistent/ddprun"}, {"PET_EVENTS", "env.jsonl"}}, "cli.jsonl"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse(c.args, c.env).events_file, c.file) << joined(c.args);
  }
}

TEST(CliEvents, AnEmptyFileNameIsAUsageError) {
  EXPECT_NE(usage_error({"--events=", "t.py"}).find("--events"), std::string::npos) << usage_error({"--events=", "t.py"});
  EXPECT_NE(usage_error({"--events"}), "");  // the program taken as the file leaves no program
}

TEST(CliEvents, HelpListsIt) {
  EXPECT_NE(info({"--help"}).find("--events FILE"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::launcher

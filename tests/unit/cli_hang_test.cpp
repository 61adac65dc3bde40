// parse_command_line: --hang-timeout SECONDS and --hang-action report|stop|restart (issue 13's hang
// detection), by table.
#include <gtest/gtest.h>

#include "cli_parse.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

TEST(CliHang, TimeoutAndAction) {
  struct Case {
    Args args;
    Environ env;
    double timeout;
    HangAction action;
  };
  const Case cases[] = {
      {{"t.py"}, kNoPath, 0, HangAction::report},  // off by default
      {{"--hang-timeout", "300", "t.py"}, kNoPath, 300, HangAction::report},
      {{"--hang-timeout=2.5", "--hang-action", "stop", "t.py"}, kNoPath, 2.5, HangAction::stop},
      {{"--hang_timeout", "60", "--hang_action=restart", "t.py"}, kNoPath, 60, HangAction::restart},
      {{"--hang-timeout", "0", "--hang-action", "report", "t.py"}, kNoPath, 0, HangAction::report},
      {{"t.py"}, {{"PATH", "/nonexistent/ddprun"}, {"PET_HANG_TIMEOUT", "120"}, {"PET_HANG_ACTION", "stop"}}, 120,
       HangAction::stop},
      {{"--hang-action", "restart", "t.py"}, {{"PATH", "/nonexistent/ddprun"}, {"PET_HANG_ACTION", "stop"}}, 0,
       HangAction::restart},
  };
  for (const auto& c : cases) {
    LaunchConfig config = parse(c.args, c.env);
    EXPECT_DOUBLE_EQ(config.hang_timeout_s, c.timeout) << joined(c.args);
    EXPECT_EQ(config.hang_action, c.action) << joined(c.args);
  }
}

TEST(CliHang, BadValuesAreUsageErrors) {
  struct Case {
    Args args;
    std::string message;
  };
  const Case cases[] = {
      {{"--hang-timeout", "-1", "t.py"}, "--hang-timeout: \"-1\" is not a number of seconds >= 0"},
      {{"--hang-timeout", "5m", "t.py"}, "--hang-timeout: \"5m\" is not a number of seconds >= 0"},
      {{"--hang-timeout", "nan", "t.py"}, "--hang-timeout: \"nan\" is not a number of seconds >= 0"},
      {{"--hang-action", "kill", "t.py"}, "--hang-action: \"kill\" is not one of report, stop, restart"},
  };
  for (const auto& c : cases) {
    std::string error = usage_error(c.args);
    EXPECT_EQ(error.substr(0, c.message.size()), c.message) << joined(c.args) << ": " << error;
  }
}

TEST(CliHang, HelpListsThem) {
  const std::string help = info({"--help"});
  EXPECT_NE(help.find("--hang-timeout SECONDS"), std::string::npos);
  EXPECT_NE(help.find("--hang-action report|stop|restart"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::launcher

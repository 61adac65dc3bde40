// parse_command_line: --status auto|on|off and --status-interval SECONDS (issue 13's console status), by table.
#include <gtest/gtest.h>

#include "cli_parse.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

TEST(CliStatus, ModeAndInterval) {
  struct Case {
    Args args;
    Environ env;
    StatusMode mode;
    double interval;
  };
  const Case cases[] = {
      {{"t.py"}, kNoPath, StatusMode::automatic, 0},
      {{"--status", "on", "t.py"}, kNoPath, StatusMode::on, 0},
      {{"--status=off", "t.py"}, kNoPath, StatusMode::off, 0},
      {{"--status", "auto", "--status-interval", "5", "t.py"}, kNoPath, StatusMode::automatic, 5},
      {{"--status_interval=0.5", "t.py"}, kNoPath, StatusMode::automatic, 0.5},
      {{"--status-interval", "0", "t.py"}, kNoPath, StatusMode::automatic, 0},
      {{"t.py"}, {{"PATH", "/nonexistent/ddprun"}, {"PET_STATUS", "off"}, {"PET_STATUS_INTERVAL", "30"}}, StatusMode::off, 30},
      {{"--status", "on", "t.py"}, {{"PATH", "/nonexistent/ddprun"}, {"PET_STATUS", "off"}}, StatusMode::on, 0},
  };
  for (const auto& c : cases) {
    LaunchConfig config = parse(c.args, c.env);
    EXPECT_EQ(config.status, c.mode) << joined(c.args);
    EXPECT_DOUBLE_EQ(config.status_interval_s, c.interval) << joined(c.args);
  }
}

TEST(CliStatus, BadValuesAreUsageErrors) {
  struct Case {
    Args args;
    std::string message;
  };
  const Case cases[] = {
      {{"--status", "yes", "t.py"}, "--status: \"yes\" is not one of auto, on, off"},
      {{"--status-interval", "-1", "t.py"}, "--status-interval: \"-1\" is not a number of seconds >= 0"},
      {{"--status-interval", "often", "t.py"}, "--status-interval: \"often\" is not a number of seconds >= 0"},
      {{"--status-interval", "inf", "t.py"}, "--status-interval: \"inf\" is not a number of seconds >= 0"},
  };
  for (const auto& c : cases) {
    std::string error = usage_error(c.args);
    EXPECT_EQ(error.substr(0, c.message.size()), c.message) << joined(c.args) << ": " << error;
  }
}

TEST(CliStatus, HelpListsThem) {
  const std::string help = info({"--help"});
  EXPECT_NE(help.find("--status auto|on|off"), std::string::npos);
  EXPECT_NE(help.find("--status-interval SECONDS"), std::string::npos);
}

}  // namespace
}  // namespace ddprun::launcher

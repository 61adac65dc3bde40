// parse_command_line: --status-port PORT and --status-host ADDR (issue 13's status endpoint), by table.
#include <gtest/gtest.h>

#include "cli_parse.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

const Environ kWithToken{{"PATH", "/nonexistent/ddprun"}, {"DDPRUN_STORE_TOKEN", "s3cret"}};

TEST(CliStatusPort, PortAndHost) {
  struct Case {
    Args args;
    Environ env;
    std::optional<int> port;
    std::string host;
  };
  const Case cases[] = {
      {{"t.py"}, kNoPath, std::nullopt, "127.0.0.1"},
      {{"--status-port", "0", "t.py"}, kNoPath, 0, "127.0.0.1"},
      {{"--status-port=8265", "t.py"}, kNoPath, 8265, "127.0.0.1"},
      {{"--status_port", "65535", "t.py"}, kNoPath, 65535, "127.0.0.1"},
      {{"--status-port", "0", "--status-host", "::1", "t.py"}, kNoPath, 0, "::1"},
      {{"--status-port", "0", "--status-host", "[::1]", "t.py"}, kNoPath, 0, "::1"},
      {{"--status-port", "0", "--status-host", "localhost", "t.py"}, kNoPath, 0, "localhost"},
      {{"--status-port", "9", "--status-host", "0.0.0.0", "t.py"}, kWithToken, 9, "0.0.0.0"},
      {{"t.py"}, {{"PATH", "/nonexistent/ddprun"}, {"PET_STATUS_PORT", "7"}}, 7, "127.0.0.1"},
  };
  for (const auto& c : cases) {
    LaunchConfig config = parse(c.args, c.env);
    EXPECT_EQ(config.status_port, c.port) << joined(c.args);
    EXPECT_EQ(config.status_host, c.host) << joined(c.args);
  }
}

TEST(CliStatusPort, BadValuesAreUsageErrors) {
  struct Case {
    Args args;
    std::string message;
  };
  const Case cases[] = {
      {{"--status-port", "http", "t.py"}, "--status-port: \"http\" is not a port number (0..65535)"},
      {{"--status-port", "65536", "t.py"}, "--status-port: \"65536\" is not a port number (0..65535)"},
      {{"--status-port", "-1", "t.py"}, "--status-port: \"-1\" is not a port number (0..65535)"},
      {{"--status-host", "127.0.0.1", "t.py"}, "--status-host: \"127.0.0.1\" needs --status-port"},
      {{"--status-port", "0", "--status-host", "0.0.0.0", "t.py"},
       "--status-host: \"0.0.0.0\" is not a loopback address, so the status endpoint requires the store token"},
      {{"--status-port", "0", "--status-host", "node7", "t.py"},
       "--status-host: \"node7\" is not a loopback address, so the status endpoint requires the store token"},
  };
  for (const auto& c : cases) {
    std::string error = usage_error(c.args);
    EXPECT_EQ(error.substr(0, c.message.size()), c.message) << joined(c.args) << ": " << error;
  }
}

TEST(CliStatusPort, HelpNamesTheOptionsAndTheSubCommands) {
  const std::string help = info({"--help"});
  for (const char* text : {"--status-port PORT", "--status-host ADDR", "ddprun status [--json] [JOB]",
                           "ddprun stacks [--json] [JOB]"}) {
    EXPECT_NE(help.find(text), std::string::npos) << text << " in\n" << help;
  }
}

}  // namespace
}  // namespace ddprun::launcher

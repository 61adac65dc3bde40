// The hosts of a job over ssh, by table: the hostfile grammar (MPI / DeepSpeed `host slots=N`),
// the -H list (Horovod's `h1:4,h2`), --include / --exclude, and every mistake's message.
#include "launcher/fleet/hostfile.hpp"

#include <gtest/gtest.h>

#include "launcher/base/errors.hpp"

namespace ddprun::launcher {
namespace {

using Hosts = std::vector<HostSlot>;

std::string hostfile_error(std::string_view text) {
  try {
    parse_hostfile(text, "hosts.txt");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Hostfile, ParsesLinesCommentsAndSlots) {
  struct Row {
    std::string text;
    Hosts hosts;
  };
  const std::vector<Row> rows{
      {"a slots=4\nb slots=2\n", {{"a", 4}, {"b", 2}}},
      {"a\nb", {{"a", std::nullopt}, {"b", std::nullopt}}},
      {"# the cluster\n\n  a  slots=8   # big one\n\tb slots=1 max_slots=2\n", {{"a", 8}, {"b", 1}}},
      {"root@10.0.0.1 slots=2\r\n", {{"root@10.0.0.1", 2}}},
      {"a max_slots=3", {{"a", std::nullopt}}},
      {"fd00::1 slots=2", {{"fd00::1", 2}}},
  };
  for (const auto& row : rows) EXPECT_EQ(parse_hostfile(row.text, "f"), row.hosts) << row.text;
}

TEST(Hostfile, EveryMistakeNamesFileAndLine) {
  struct Row {
    std::string text;
    std::string error;
  };
  const std::vector<Row> rows{
      {"", "--hostfile hosts.txt: lists no host"},
      {"# only a comment\n", "--hostfile hosts.txt: lists no host"},
      {"a\nb slots=0\n", "--hostfile hosts.txt:2: slots=0 is not a count >= 1"},
      {"a slots=x", "--hostfile hosts.txt:1: slots=\"x\" is not a count (an integer from 1 to 999999)"},
      {"a slots=", "--hostfile hosts.txt:1: slots=\"\" is not a count (an integer from 1 to 999999)"},
      {"a 4", "--hostfile hosts.txt:1: \"4\" is not slots=N (a line is: HOST [slots=N])"},
      {"a cpus=4", "--hostfile hosts.txt:1: \"cpus=4\" is not slots=N (a line is: HOST [slots=N])"},
      {"a\na slots=2", "--hostfile hosts.txt: host \"a\" is listed twice (give it one line with slots=N)"},
      {"-oProxyCommand=x", "--hostfile hosts.txt:1: \"-oProxyCommand=x\" is not a host name (it starts with '-')"},
      {"user@ slots=1", "--hostfile hosts.txt:1: \"user@\" names no host after the user"},
  };
  for (const auto& row : rows) EXPECT_EQ(hostfile_error(row.text), row.error) << row.text;
}

TEST(HostList, ParsesSlotsAndIpv6) {
  struct Row {
    std::string text;
    Hosts hosts;
  };
  const std::vector<Row> rows{
      {"h1:4,h2:4", {{"h1", 4}, {"h2", 4}}},
      {"h1, h2:2", {{"h1", std::nullopt}, {"h2", 2}}},
      {"[fd00::1]:2,fd00::2", {{"[fd00::1]", 2}, {"fd00::2", std::nullopt}}},
      {"u@h:3", {{"u@h", 3}}},
  };
  for (const auto& row : rows) EXPECT_EQ(parse_host_list(row.text, "-H"), row.hosts) << row.text;
  EXPECT_THROW(parse_host_list("h1:0", "-H"), UsageError);
  EXPECT_THROW(parse_host_list("h1,,h2", "-H"), UsageError);
  EXPECT_THROW(parse_host_list("h1,h1:2", "-H"), UsageError);
  EXPECT_THROW(parse_host_list("h1:two", "-H"), UsageError);
}

TEST(HostAddress, DropsUserAndBrackets) {
  EXPECT_EQ(host_address("h"), "h");
  EXPECT_EQ(host_address("u@h"), "h");
  EXPECT_EQ(host_address("u@[fd00::1]"), "fd00::1");
  EXPECT_EQ(host_address("[fd00::1]"), "fd00::1");
}

TEST(SelectHosts, IncludeAndExclude) {
  const Hosts all{{"a", 1}, {"u@b", 2}, {"c", std::nullopt}};
  struct Row {
    std::string include, exclude;
    Hosts kept;
  };
  const std::vector<Row> rows{
      {"", "", all},
      {"a,c", "", {{"a", 1}, {"c", std::nullopt}}},
      {"b", "", {{"u@b", 2}}},  // by address as well as by destination
      {"", "u@b", {{"a", 1}, {"c", std::nullopt}}},
      {"", "a, c", {{"u@b", 2}}},
  };
  for (const auto& row : rows) EXPECT_EQ(select_hosts(all, row.include, row.exclude), row.kept) << row.include << row.exclude;

  auto error = [&](std::string_view include, std::string_view exclude) {
    try {
      select_hosts(all, include, exclude);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error("a", "b"), "--include: cannot be used with --exclude (name the hosts to keep, or those to leave out)");
  EXPECT_EQ(error("d", ""), "--include: \"d\" is not one of the job's hosts");
  EXPECT_EQ(error("", "a,b,c"), "--exclude: leaves no host to run on");
}

}  // namespace
}  // namespace ddprun::launcher

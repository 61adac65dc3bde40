// The small helpers of common/: integers from text, the environment as a value, token files,
// bind-and-listen. The pure ones by table.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/environment.hpp"
#include "common/integer.hpp"
#include "common/listen.hpp"
#include "common/token_file.hpp"
#include "scratch_folder.hpp"

namespace ddprun::common {
namespace {

using testing_support::ScratchFolder;
using tcp = boost::asio::ip::tcp;

struct IntCase {
  std::string text;
  std::optional<int> expected;
};

TEST(ParseInteger, IntByTable) {
  const std::vector<IntCase> cases = {
      {"0", 0},
      {"42", 42},
      {"-7", -7},
      {"007", 7},  // leading zeros are digits ("01" names device 1)
      {"2147483647", std::numeric_limits<int>::max()},
      {"-2147483648", std::numeric_limits<int>::min()},
      {"2147483648", std::nullopt},  // overflow
      {"-2147483649", std::nullopt},
      {"", std::nullopt},
      {"-", std::nullopt},
      {"+7", std::nullopt},  // from_chars takes no '+'
      {" 7", std::nullopt},
      {"7 ", std::nullopt},
      {"7\n", std::nullopt},
      {"12a", std::nullopt},  // all of the text, or nothing
      {"0x10", std::nullopt},
      {"1.5", std::nullopt},
      {"1e3", std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_integer<int>(c.text), c.expected) << '"' << c.text << '"';
}

TEST(ParseInteger, UnsignedTakesNoSign) {
  EXPECT_EQ(parse_integer<unsigned>("-1"), std::nullopt);
  EXPECT_EQ(parse_integer<unsigned>("4294967295"), 4294967295U);
  EXPECT_EQ(parse_integer<std::uint64_t>("18446744073709551615"), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(parse_integer<std::uint64_t>("18446744073709551616"), std::nullopt);
}

TEST(ParseInteger, WideAndPidTypes) {
  EXPECT_EQ(parse_integer<std::int64_t>("-9223372036854775808"), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(parse_integer<long long>("9223372036854775807"), std::numeric_limits<long long>::max());
  EXPECT_EQ(parse_integer<pid_t>("1234"), 1234);
  EXPECT_EQ(parse_integer<short>("32768"), std::nullopt);
}

TEST(ParseInteger, OtherBases) {
  EXPECT_EQ(parse_integer<int>("040", 8), 32);  // mountinfo's \040, a space
  EXPECT_EQ(parse_integer<int>("134", 8), 92);  // \134, a backslash
  EXPECT_EQ(parse_integer<int>("8", 8), std::nullopt);
  EXPECT_EQ(parse_integer<int>("ff", 16), 255);
  EXPECT_EQ(parse_integer<int>("FF", 16), 255);
}

struct LineEndCase {
  std::string text;
  std::string expected;
};

TEST(TokenFile, WithoutLineEndByTable) {
  const std::vector<LineEndCase> cases = {
      {"s3cret", "s3cret"},   {"s3cret\n", "s3cret"},   {"s3cret\r\n", "s3cret"},
      {"s3cret\r", "s3cret"}, {"s3cret\n\n", "s3cret\n"},  // one line end goes, not every one
      {"", ""},               {"\n", ""},               {"\r\n", ""},
      {"a\nb", "a\nb"},       {" s3cret ", " s3cret "},  // spaces may be part of a secret
  };
  for (const auto& c : cases) EXPECT_EQ(without_line_end(c.text), c.expected) << '"' << c.text << '"';
}

TEST(TokenFile, ReadsTheFileWithoutItsLineEnd) {
  ScratchFolder folder("common_token");
  // An empty file reads as an empty token: what that means is the caller's to say.
  const std::vector<LineEndCase> files = {
      {"s3cret\r\n", "s3cret"},
      {std::string("a\0b\n", 4), std::string("a\0b", 3)},  // bytes, whatever they are
      {"", ""},
  };
  for (const auto& file : files) {
    folder.write("token", file.text, 0600);
    TokenFile read = read_token_file((folder.root() / "token").string());
    EXPECT_EQ(read.error, "");
    EXPECT_EQ(read.token, file.expected) << '"' << file.text << '"';
  }
}

TEST(TokenFile, AMissingFileSaysWhy) {
  TokenFile read = read_token_file("/nonexistent/ddprun/token");
  EXPECT_EQ(read.token, "");
  EXPECT_EQ(read.error, "No such file or directory");
}

TEST(Environment, SnapshotHoldsThisProcesssVariables) {
  ASSERT_EQ(::setenv("DDPRUN_COMMON_TEST", "a=b", 1), 0);  // the value may hold '='
  ASSERT_EQ(::setenv("DDPRUN_COMMON_EMPTY", "", 1), 0);
  ASSERT_EQ(::unsetenv("DDPRUN_COMMON_UNSET"), 0);
  Environment env = environment_snapshot();
  EXPECT_EQ(lookup(env, "DDPRUN_COMMON_TEST"), "a=b");
  EXPECT_EQ(lookup(env, "DDPRUN_COMMON_EMPTY"), "");  // set, though empty
  EXPECT_EQ(lookup(env, "DDPRUN_COMMON_UNSET"), std::nullopt);
  EXPECT_EQ(getenv_value("DDPRUN_COMMON_TEST"), "a=b");
  EXPECT_EQ(getenv_value("DDPRUN_COMMON_EMPTY"), "");
  EXPECT_EQ(getenv_value("DDPRUN_COMMON_UNSET"), std::nullopt);
  ::unsetenv("DDPRUN_COMMON_TEST");
  ::unsetenv("DDPRUN_COMMON_EMPTY");
}

TEST(Environment, SnapshotIsACopy) {
  ASSERT_EQ(::setenv("DDPRUN_COMMON_TEST", "before", 1), 0);
  Environment env = environment_snapshot();
  ASSERT_EQ(::setenv("DDPRUN_COMMON_TEST", "after", 1), 0);
  EXPECT_EQ(lookup(env, "DDPRUN_COMMON_TEST"), "before");
  ::unsetenv("DDPRUN_COMMON_TEST");
}

TEST(Listen, AnAddressIsTakenAsItIsAndANameIsResolved) {
  boost::asio::io_context io;
  boost::system::error_code error;
  auto v4 = endpoint_to_bind(io, "127.0.0.1", 29500, error);
  ASSERT_TRUE(v4) << error.message();
  EXPECT_EQ(*v4, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 29500));
  auto name = endpoint_to_bind(io, "localhost", 0, error);
  ASSERT_TRUE(name) << error.message();
  EXPECT_TRUE(name->address().is_loopback());
  EXPECT_FALSE(endpoint_to_bind(io, "no-such-host.invalid", 0, error));
}

TEST(Listen, BindsAFreePortAndATakenOneIsAddressInUse) {
  boost::asio::io_context io;
  tcp::acceptor first(io);
  const tcp::endpoint any_port(boost::asio::ip::make_address("127.0.0.1"), 0);
  ASSERT_FALSE(bind_and_listen(first, any_port, 16));
  const auto port = first.local_endpoint().port();
  EXPECT_NE(port, 0);
  tcp::socket client(io);
  client.connect(first.local_endpoint());  // it listens: the handshake completes into the backlog
  tcp::acceptor second(io);
  EXPECT_EQ(bind_and_listen(second, tcp::endpoint(any_port.address(), port), 16),
            boost::asio::error::address_in_use);
}

TEST(Listen, AnIpv6ListenerTakesIpv4Peers) {
  boost::asio::io_context io;
  tcp::acceptor acceptor(io);
  boost::system::error_code error = bind_and_listen(acceptor, tcp::endpoint(tcp::v6(), 0), 16);
  if (error) GTEST_SKIP() << "no IPv6 on this machine: " << error.message();
  boost::asio::ip::v6_only v6_only;
  acceptor.get_option(v6_only);
  EXPECT_FALSE(v6_only.value()) << "set off whatever net.ipv6.bindv6only says";
  tcp::socket client(io);
  client.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), acceptor.local_endpoint().port()), error);
  EXPECT_FALSE(error) << error.message();
}

}  // namespace
}  // namespace ddprun::common

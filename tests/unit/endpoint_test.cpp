// Endpoints: parsing as torchrun users write them, and which addresses are this machine.
#include "rendezvous/endpoint.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ddprun::rendezvous;

namespace {

/// The message parse_endpoint throws for `text`; empty when it does not throw.
std::string parse_error(std::string_view text) {
  try {
    parse_endpoint(text, 29400);
  } catch (const Error& error) {  // the rendezvous layer's error
    return error.what();
  }
  return {};
}

/// The numeric addresses of this machine's interfaces, the loopback ones only when asked.
std::vector<std::string> interface_addresses(bool include_loopback) {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (entry->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr, text, sizeof text);
    } else if (entry->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(entry->ifa_addr)->sin6_addr, text, sizeof text);
    } else {
      continue;
    }
    std::string address = text;
    bool loopback = address.rfind("127.", 0) == 0 || address == "::1";
    if (include_loopback || !loopback) out.push_back(address);
  }
  freeifaddrs(list);
  return out;
}

bool has_address(const std::string& address) {
  for (const auto& mine : interface_addresses(true)) {
    if (mine == address) return true;
  }
  return false;
}

}  // namespace

TEST(ParseEndpoint, HostAloneTakesTheDefaultPort) {
  Endpoint endpoint = parse_endpoint("node1.example", 29400);
  EXPECT_EQ(endpoint.host, "node1.example");
  EXPECT_EQ(endpoint.port, 29400);
  EXPECT_EQ(parse_endpoint("10.0.0.1", 1234).port, 1234);
}

TEST(ParseEndpoint, HostAndPort) {
  Endpoint endpoint = parse_endpoint("10.1.2.3:29500", 29400);
  EXPECT_EQ(endpoint.host, "10.1.2.3");
  EXPECT_EQ(endpoint.port, 29500);
  EXPECT_EQ(parse_endpoint("localhost:0", 29400).port, 0);
  EXPECT_EQ(parse_endpoint("h:65535", 29400).port, 65535);
}

TEST(ParseEndpoint, BracketedIpv6WithAndWithoutPort) {
  Endpoint with_port = parse_endpoint("[fd00::1]:29500", 29400);
  EXPECT_EQ(with_port.host, "fd00::1");
  EXPECT_EQ(with_port.port, 29500);
  Endpoint without_port = parse_endpoint("[::1]", 29400);
  EXPECT_EQ(without_port.host, "::1");
  EXPECT_EQ(without_port.port, 29400);
}

TEST(ParseEndpoint, BareIpv6HasNoPort) {
  Endpoint endpoint = parse_endpoint("fd00::1", 29400);
  EXPECT_EQ(endpoint.host, "fd00::1");
  EXPECT_EQ(endpoint.port, 29400);
  EXPECT_EQ(parse_endpoint("::1", 7).host, "::1");
  EXPECT_EQ(parse_endpoint("fe80::1%eth0", 7).host, "fe80::1%eth0");
}

TEST(ParseEndpoint, ErrorsQuoteTheText) {
  for (std::string_view bad : {"", ":80", "[::1", "[::1]80", "[::1]:", "[]:80", "h]:80", "h:", "a:b:c"}) {
    std::string message = parse_error(bad);
    EXPECT_NE(message, "") << "accepted \"" << bad << "\"";
    EXPECT_EQ(message.rfind("\"" + std::string(bad) + "\": ", 0), 0u) << message;
  }
}

TEST(ParseEndpoint, PortOutOfRangeOrNotANumber) {
  EXPECT_EQ(parse_error("h:-1"), "\"h:-1\": port -1 is not in 0..65535");
  EXPECT_EQ(parse_error("h:65536"), "\"h:65536\": port 65536 is not in 0..65535");
  EXPECT_EQ(parse_error("host:99999999999999999999"),
            "\"host:99999999999999999999\": port 99999999999999999999 is not in 0..65535");
  EXPECT_EQ(parse_error("h:abc"), "\"h:abc\": port \"abc\" is not a number");
  EXPECT_EQ(parse_error("h:+80"), "\"h:+80\": port \"+80\" is not a number");
  EXPECT_EQ(parse_error("[::1]:65536"), "\"[::1]:65536\": port 65536 is not in 0..65535");
}

TEST(FormatEndpoint, BracketsIpv6Only) {
  EXPECT_EQ(format_endpoint("10.0.0.1", 29400), "10.0.0.1:29400");
  EXPECT_EQ(format_endpoint("node1", 80), "node1:80");
  EXPECT_EQ(format_endpoint("fd00::1", 29400), "[fd00::1]:29400");
  EXPECT_EQ(format_endpoint("[::1]", 5), "[::1]:5");
}

TEST(FormatEndpoint, RoundTripsThroughParse) {
  for (std::string host : {"10.0.0.1", "fd00::1", "::1", "node-7.cluster"}) {
    Endpoint endpoint = parse_endpoint(format_endpoint(host, 4242), 1);
    EXPECT_EQ(endpoint.host, host);
    EXPECT_EQ(endpoint.port, 4242);
  }
}

TEST(Ipv6Literal, RecognizesAddressesOnly) {
  EXPECT_TRUE(is_ipv6_literal("::1"));
  EXPECT_TRUE(is_ipv6_literal("[::1]"));
  EXPECT_TRUE(is_ipv6_literal("fd00::2"));
  EXPECT_TRUE(is_ipv6_literal("fe80::1%eth0"));
  EXPECT_TRUE(is_ipv6_literal("::ffff:10.0.0.1"));
  EXPECT_FALSE(is_ipv6_literal("10.0.0.1"));
  EXPECT_FALSE(is_ipv6_literal("localhost"));
  EXPECT_FALSE(is_ipv6_literal("a:b:c"));
  EXPECT_FALSE(is_ipv6_literal("[::1"));
  EXPECT_FALSE(is_ipv6_literal(""));
}

TEST(WildcardAddress, FollowsTheFamily) {
  EXPECT_EQ(wildcard_address_for("fd00::1"), "::");
  EXPECT_EQ(wildcard_address_for("[::1]"), "::");
  EXPECT_EQ(wildcard_address_for("10.0.0.1"), "0.0.0.0");
  EXPECT_EQ(wildcard_address_for("node1"), "0.0.0.0");
}

TEST(LocalAddressToward, LoopbackV4) { EXPECT_EQ(local_address_toward("127.0.0.1", 80), "127.0.0.1"); }

TEST(LocalAddressToward, LoopbackV6) {
  if (!has_address("::1")) GTEST_SKIP() << "this machine has no IPv6 loopback";
  EXPECT_EQ(local_address_toward("::1", 80), "::1");
  EXPECT_EQ(local_address_toward("[::1]", 0), "::1");
}

TEST(LocalAddressToward, OwnInterfaceAddressRoutesToItself) {
  std::vector<std::string> addresses = interface_addresses(false);
  if (addresses.empty()) GTEST_SKIP() << "no network interface besides the loopback";
  // An address of this machine is reached through the local route, with itself as the source.
  // IPv4 only: an IPv6 address may still be tentative (duplicate address detection), and then the
  // kernel picks another source.
  for (const auto& address : addresses) {
    if (address.find(':') != std::string::npos) continue;
    EXPECT_EQ(local_address_toward(address, 80), address);
  }
}

TEST(LocalAddressToward, UnresolvableNameThrows) {
  try {
    local_address_toward("no-such-host.invalid", 80);
    FAIL() << "resolved no-such-host.invalid";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()).rfind("cannot resolve no-such-host.invalid: ", 0), 0u) << error.what();
  }
}

TEST(IsThisMachine, Loopback) {
  EXPECT_TRUE(is_this_machine("127.0.0.1"));
  EXPECT_TRUE(is_this_machine("127.1.2.3"));
  EXPECT_TRUE(is_this_machine("::1"));
  EXPECT_TRUE(is_this_machine("[::1]"));
  EXPECT_TRUE(is_this_machine("localhost"));
  EXPECT_TRUE(is_this_machine("LocalHost"));
}

TEST(IsThisMachine, HostName) {
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof name - 1), 0);
  std::string host = name;
  EXPECT_TRUE(is_this_machine(host));
  for (char& c : host) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(is_this_machine(host));
}

TEST(IsThisMachine, AddressOfAnInterface) {
  std::vector<std::string> addresses = interface_addresses(false);
  if (addresses.empty()) GTEST_SKIP() << "no network interface besides the loopback";
  for (const auto& address : addresses) EXPECT_TRUE(is_this_machine(address)) << address;
}

TEST(IsThisMachine, OtherAddressesAndUnknownNames) {
  // Documentation ranges (RFC 5737, RFC 3849); skipped where a test network gave one to this machine.
  for (std::string other : {"192.0.2.1", "203.0.113.7", "2001:db8::7"}) {
    if (has_address(other)) continue;
    EXPECT_FALSE(is_this_machine(other)) << other;
  }
  EXPECT_FALSE(is_this_machine("no-such-host.invalid"));
  EXPECT_FALSE(is_this_machine(""));
}

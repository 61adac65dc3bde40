// Who may ask the status endpoint for what: paths, methods, the token and the Host header, by table.
#include <gtest/gtest.h>

#include "launcher/observe/status_request.hpp"

namespace ddprun::launcher {
namespace {

TEST(StatusRequest, DecisionTable) {
  const std::optional<std::string> none;
  const std::optional<std::string> secret = std::string("s3cret");
  using V = StatusVerdict;
  using R = StatusResource;
  const struct {
    const char* method;
    const char* target;
    const char* authorization;
    const char* host;
    bool unix_socket;
    const char* fetch_site;
    std::optional<std::string> token;
    V verdict;
    R resource;
  } rows[] = {
      // Loopback without a token: any loopback Host.
      {"GET", "/", "", "127.0.0.1:8080", false, "", none, V::serve, R::page},
      {"GET", "/index.html", "", "localhost", false, "", none, V::serve, R::page},
      {"GET", "/api/status", "", "[::1]:9", false, "", none, V::serve, R::status},
      {"HEAD", "/api/status?x=1", "", "127.1.2.3", false, "", none, V::serve, R::status},
      {"GET", "/api/stacks", "", "LOCALHOST:1", false, "", none, V::serve, R::stacks},
      {"GET", "/metrics", "", "127.0.0.1", false, "", none, V::serve, R::metrics},
      // DNS rebinding: a page of evil.example reaching 127.0.0.1 sends Host: evil.example.
      {"GET", "/api/status", "", "evil.example:8080", false, "", none, V::forbidden_host, R::page},
      {"GET", "/api/status", "", "", false, "", none, V::forbidden_host, R::page},
      {"GET", "/api/status", "", "10.0.0.1", false, "", none, V::forbidden_host, R::page},
      {"GET", "/api/status", "", "localhost.evil.example", false, "", none, V::forbidden_host, R::page},
      {"GET", "/api/status", "", "[::1", false, "", none, V::forbidden_host, R::page},
      // Paths and methods.
      {"GET", "/api/status/", "", "localhost", false, "", none, V::not_found, R::page},
      {"GET", "/api", "", "localhost", false, "", none, V::not_found, R::page},
      {"GET", "/../etc/passwd", "", "localhost", false, "", none, V::not_found, R::page},
      {"POST", "/api/status", "", "localhost", false, "", none, V::method_not_allowed, R::page},
      {"DELETE", "/", "", "localhost", false, "", none, V::method_not_allowed, R::page},
      {"POST", "/nowhere", "", "localhost", false, "", none, V::not_found, R::page},
      // With the token: it is required, by header or query; the Host no longer matters.
      {"GET", "/api/status", "Bearer s3cret", "node7:8080", false, "", secret, V::serve, R::status},
      {"GET", "/api/status", "bearer   s3cret ", "node7", false, "", secret, V::serve, R::status},
      {"GET", "/metrics?token=s3cret", "", "node7", false, "", secret, V::serve, R::metrics},
      {"GET", "/?a=1&token=s3cre%74", "", "node7", false, "", secret, V::serve, R::page},
      {"GET", "/api/status", "", "localhost", false, "", secret, V::unauthorized, R::page},
      {"GET", "/api/status", "Bearer wrong", "localhost", false, "", secret, V::unauthorized, R::page},
      {"GET", "/api/status", "Basic czNjcmV0", "localhost", false, "", secret, V::unauthorized, R::page},
      {"GET", "/api/status?token=s3cre", "", "localhost", false, "", secret, V::unauthorized, R::page},
      {"GET", "/api/status?token=s3cret%", "", "localhost", false, "", secret, V::unauthorized, R::page},
      {"GET", "/nowhere", "", "localhost", false, "", secret, V::unauthorized, R::page},  // nothing told before the token
      // A browser's request made by another site's page, whatever the token; same-origin (the
      // page's own fetches) and none (typed in the address bar) are the owner's.
      {"GET", "/api/stacks", "", "127.0.0.1:8080", false, "cross-site", none, V::forbidden_origin, R::page},
      {"GET", "/api/stacks", "", "127.0.0.1:8080", false, "same-site", none, V::forbidden_origin, R::page},
      {"GET", "/api/stacks", "Bearer s3cret", "node7", false, "cross-site", secret, V::forbidden_origin, R::page},
      {"GET", "/api/stacks", "", "127.0.0.1:8080", false, "same-origin", none, V::serve, R::stacks},
      {"GET", "/", "", "127.0.0.1:8080", false, "none", none, V::serve, R::page},
      {"GET", "/api/status", "", "", true, "cross-site", none, V::serve, R::status},  // no browser reaches the socket
      // The Unix socket: its permissions and the peer's uid guard it.
      {"GET", "/api/status", "", "", true, "", secret, V::serve, R::status},
      {"GET", "/api/stacks", "", "whatever", true, "", none, V::serve, R::stacks},
  };
  for (const auto& row : rows) {
    StatusRequestFacts facts{row.method, row.target, row.authorization, row.host, row.fetch_site, row.unix_socket};
    StatusDecision decision = decide_status_request(facts, row.token);
    EXPECT_EQ(decision.verdict, row.verdict) << row.method << " " << row.target << " host=" << row.host;
    if (row.verdict == V::serve) {
      EXPECT_EQ(decision.resource, row.resource) << row.target;
    }
  }
}

TEST(StatusRequest, QueryParameters) {
  const struct {
    const char* target;
    const char* name;
    std::optional<std::string> value;
  } rows[] = {
      {"/x?token=abc", "token", "abc"},
      {"/x?a=1&token=a%2Bb+c", "token", "a+b c"},
      {"/x?token", "token", ""},
      {"/x?tok=1", "token", std::nullopt},
      {"/x", "token", std::nullopt},
      {"/x?token=%zz", "token", std::nullopt},
      {"/x?token=%4", "token", std::nullopt},
      {"/x?token=a#frag", "token", "a"},
      {"/x?first=1&token=2&token=3", "token", "2"},
  };
  for (const auto& row : rows) EXPECT_EQ(query_parameter(row.target, row.name), row.value) << row.target;
  EXPECT_EQ(target_path("/api/status?x=1"), "/api/status");
  EXPECT_EQ(target_path("/metrics"), "/metrics");
}

TEST(StatusRequest, LoopbackAddresses) {
  const struct {
    const char* address;
    bool loopback;
  } rows[] = {
      {"127.0.0.1", true}, {"127.9.9.9", true}, {"::1", true},   {"[::1]", true},
      {"localhost", true}, {"::ffff:127.0.0.1", true},          {"0.0.0.0", false},
      {"::", false},       {"10.1.2.3", false}, {"node7", false}, {"", false},
  };
  for (const auto& row : rows) EXPECT_EQ(is_loopback_address(row.address), row.loopback) << row.address;
}

}  // namespace
}  // namespace ddprun::launcher

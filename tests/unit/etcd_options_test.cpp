// --rdzv-endpoint and --rdzv-conf for etcd-v3, and which lease a key lives with: tables, no I/O.
#include "rendezvous/etcd/etcd_options.hpp"
#include "rendezvous/etcd/etcd_session.hpp"

#include <gtest/gtest.h>

using namespace ddprun::rendezvous;
using Conf = std::map<std::string, std::string>;

TEST(EtcdOptions, EndpointsAreAListWithTheDefaultPortAndOptionalSchemes) {
  const EtcdOptions options = parse_etcd_options("h1:2379, h2 ,http://[fd00::3]:23790/", {});
  EXPECT_EQ(options.endpoints, (std::vector<Endpoint>{{"h1", 2379}, {"h2", 2379}, {"fd00::3", 23790}}));
  EXPECT_EQ(options.describe_endpoints(), "h1:2379,h2:2379,[fd00::3]:23790");
  EXPECT_FALSE(options.tls);
  EXPECT_EQ(options.key_prefix, "/");
  EXPECT_EQ(options.lease_ttl, std::chrono::seconds(10));
}

TEST(EtcdOptions, ConfKeys) {
  const EtcdOptions options = parse_etcd_options(
      "h1", Conf{{"key_prefix", "/team-a"}, {"lease_ttl", "4"}, {"user", "u"}, {"password", "p"}, {"join_timeout", "5"}});
  EXPECT_EQ(options.key_prefix, "/team-a/");
  EXPECT_FALSE(options.tls);
  EXPECT_EQ(options.lease_ttl, std::chrono::seconds(4));
  EXPECT_EQ(options.user, "u");
}

TEST(EtcdOptions, TlsIsOnForHttpsOrAnyTlsFile) {
  struct Case {
    std::string endpoints;
    Conf conf;
    bool tls;
  };
  const std::vector<Case> cases = {
      {"h1", {}, false},
      {"https://h1,https://h2", {}, true},
      {"h1", {{"cacert", "/ca.pem"}}, true},
      {"h1", {{"cert", "/c.pem"}, {"key", "/k.pem"}}, true},
      {"h1", {{"protocol", "https"}}, true},
      {"h1", {{"protocol", "http"}}, false},
      {"https://h1", {{"protocol", "https"}, {"cacert", "/ca.pem"}}, true},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_etcd_options(c.endpoints, c.conf).tls, c.tls) << c.endpoints;
  const EtcdOptions options =
      parse_etcd_options("https://h1", Conf{{"cacert", "/ca.pem"}, {"cert", "/c.pem"}, {"key", "/k.pem"}});
  EXPECT_EQ(options.cacert, "/ca.pem");
  EXPECT_EQ(options.cert, "/c.pem");
  EXPECT_EQ(options.key, "/k.pem");
  EXPECT_EQ(options.endpoints, (std::vector<Endpoint>{{"h1", 2379}}));
}

TEST(EtcdOptions, MistakesAreNamed) {
  struct Case {
    std::string endpoints;
    Conf conf;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", {}, "\"\" names no etcd member (write HOST[:PORT],HOST[:PORT],...)"},
      {" , ", {}, "\" , \" names no etcd member (write HOST[:PORT],HOST[:PORT],...)"},
      {"h1", {{"lease_ttl", "1"}}, "lease_ttl=1 is not an integer number of seconds in 2..3600"},
      {"h1", {{"lease_ttl", "2.5"}}, "lease_ttl=2.5 is not an integer number of seconds in 2..3600"},
      {"h1", {{"cert", "/c.pem"}}, "cert is given without key: TLS client authentication needs both"},
      {"h1", {{"protocol", "grpc"}}, "protocol=grpc is not http or https"},
      {"h1", {{"protocol", "http"}, {"cacert", "/ca.pem"}}, "protocol=http, but TLS files or an https:// endpoint are given"},
      {"h1", {{"password", "p"}}, "password is given without user"},
      {"https://h1,http://h2", {}, "mixes http:// and https:// members: one cluster's client ports speak one protocol"},
      {"http://h1", {{"cacert", "/ca.pem"}}, "names http:// members, but TLS is asked for (protocol=https, cacert, cert or key)"},
      {"http://h1", {{"protocol", "https"}}, "names http:// members, but TLS is asked for (protocol=https, cacert, cert or key)"},
  };
  for (const auto& c : cases) {
    try {
      parse_etcd_options(c.endpoints, c.conf);
      ADD_FAILURE() << "accepted " << c.endpoints;
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()), c.message);
    }
  }
  EXPECT_THROW(parse_etcd_options("h1:99999", {}), Error);
}

TEST(EtcdOptions, EachKeyLivesWithTheRightLease) {
  using Kind = LeaseScope::Kind;
  struct Case {
    const char* key;
    LeaseScope scope;
  };
  const std::vector<Case> cases = {
      {"ddprun/rdzv/job/heartbeat/node-1", {Kind::node, ""}},
      {"ddprun/rdzv/job/round", {Kind::job, "job"}},
      {"ddprun/rdzv/job/0/join/1", {Kind::job, "job"}},
      {"ddprun/rdzv/job/board/0/status/1", {Kind::job, "job"}},
      {"ddprun/host/run_id", {Kind::none, ""}},
      {"ddprun/rdzv/", {Kind::none, ""}},
      {"worker/key", {Kind::none, ""}},
  };
  for (const auto& c : cases) EXPECT_EQ(lease_scope(c.key), c.scope) << c.key;
}

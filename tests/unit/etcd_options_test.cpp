// --rdzv-endpoint and --rdzv-conf for etcd-v3, and which lease a key lives with: tables, no I/O.
// --rdzv-conf's entries are taken as the CLI takes them (take_etcd_conf_key, in key order).
#include "rendezvous/etcd/etcd_options.hpp"
#include "rendezvous/etcd/etcd_session.hpp"

#include <gtest/gtest.h>

using namespace ddprun::rendezvous;
using Conf = std::map<std::string, std::string>;

namespace {

/// parse_etcd_options on `conf`'s entries taken one by one, as the CLI takes --rdzv-conf's.
EtcdOptions parse(std::string_view endpoints, const Conf& conf) {
  EtcdConf taken;
  for (const auto& [key, value] : conf) take_etcd_conf_key(taken, key, value);
  return parse_etcd_options(endpoints, taken);
}

}  // namespace

TEST(EtcdOptions, EndpointsAreAListWithTheDefaultPortAndOptionalSchemes) {
  const EtcdOptions options = parse("h1:2379, h2 ,http://[fd00::3]:23790/", {});
  EXPECT_EQ(options.endpoints, (std::vector<Endpoint>{{"h1", 2379}, {"h2", 2379}, {"fd00::3", 23790}}));
  EXPECT_EQ(options.describe_endpoints(), "h1:2379,h2:2379,[fd00::3]:23790");
  EXPECT_FALSE(options.tls);
  EXPECT_EQ(options.key_prefix, "/");
  EXPECT_EQ(options.lease_ttl, std::chrono::seconds(10));
}

TEST(EtcdOptions, ConfKeys) {
  const EtcdOptions options = parse(
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
  for (const auto& c : cases) EXPECT_EQ(parse(c.endpoints, c.conf).tls, c.tls) << c.endpoints;
  const EtcdOptions options =
      parse("https://h1", Conf{{"cacert", "/ca.pem"}, {"cert", "/c.pem"}, {"key", "/k.pem"}});
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
      parse(c.endpoints, c.conf);
      ADD_FAILURE() << "accepted " << c.endpoints;
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()), c.message);
    }
  }
  EXPECT_THROW(parse("h1:99999", {}), Error);
}

TEST(EtcdOptions, OnlyEtcdKeysAreTakenAndALaterEntryReplacesAnEarlierOne) {
  EtcdConf conf;
  for (const char* other : {"join_timeout", "timeout", "is_host", "store_type", "keyprefix", "Key"}) {
    EXPECT_FALSE(take_etcd_conf_key(conf, other, "5")) << other;
  }
  for (const char* key : {"key_prefix", "protocol", "cacert", "cert", "key", "user", "password", "lease_ttl"}) {
    EXPECT_TRUE(take_etcd_conf_key(conf, key, "x")) << key;
  }
  EXPECT_EQ(conf.protocol_refused, "protocol=x is not http or https");
  EXPECT_EQ(conf.lease_ttl_refused, "lease_ttl=x is not an integer number of seconds in 2..3600");
  // Refusals are kept, not thrown (a c10d job ignores these keys), and a later good value drops them.
  take_etcd_conf_key(conf, "protocol", "https");
  take_etcd_conf_key(conf, "lease_ttl", "7");
  EXPECT_EQ(conf.protocol_refused, "");
  EXPECT_EQ(conf.https, true);
  EXPECT_EQ(conf.lease_ttl_refused, "");
  EXPECT_EQ(conf.lease_ttl, std::chrono::seconds(7));
  take_etcd_conf_key(conf, "lease_ttl", "1");
  EXPECT_EQ(conf.lease_ttl_refused, "lease_ttl=1 is not an integer number of seconds in 2..3600");
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

#pragma once
/// EtcdOptions: where an etcd-v3 rendezvous lives and how to talk to it, from --rdzv-endpoint (a
/// comma-separated list of members) and --rdzv-conf's etcd keys. Pure.
///
/// --rdzv-conf keys (others are the rendezvous' own, rendezvous_settings.hpp):
///   key_prefix   every key of the job lives under it (default "/"; "/team-a" -> "/team-a/ddprun/rdzv/...")
///   protocol     http or https (default http; https when cacert or cert is given)
///   cacert       PEM file of the CA that signed the members' certificates (https)
///   cert, key    PEM files of this client's certificate and private key (TLS client authentication)
///   (the server's certificate is always verified: against cacert, else the system's CAs, and for
///   the name or address the endpoint is written with)
///   user, password   etcd user authentication (POST /v3/auth/authenticate)
///   lease_ttl    seconds: an agent's keys (its heartbeat) vanish this long after it stops renewing
///                its lease, so a dead or frozen node is dropped within it (default 10, integer >= 2)
/// The names of protocol/cacert/cert/key are those of torchrun's etcd backends.
#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/endpoint.hpp"

namespace ddprun::rendezvous {

/// etcd's client port, when an endpoint names none.
inline constexpr int kDefaultEtcdPort = 2379;

struct EtcdOptions {
  std::vector<Endpoint> endpoints;  ///< tried in this order; a member that fails moves to the back
  std::string key_prefix = "/";     ///< always ends with '/'
  bool tls = false;
  std::string cacert;  ///< empty: the system's CA store
  std::string cert;
  std::string key;
  std::string user;
  std::string password;
  std::chrono::seconds lease_ttl{10};

  /// "h1:2379,h2:2379" as errors name the members.
  std::string describe_endpoints() const;
};

/// Parses "h1:2379,h2:2379,[::1]:2379" (a scheme "http://" or "https://" before each is allowed;
/// https turns TLS on) and the etcd keys of `conf`. Throws Error naming the text and what is wrong
/// (no endpoint, a bad endpoint, a lease_ttl that is not an integer >= 2, a cert without a key,
/// protocol neither http nor https, http:// members with TLS asked for); callers prefix the flag's name.
EtcdOptions parse_etcd_options(std::string_view endpoints, const std::map<std::string, std::string>& conf);

}  // namespace ddprun::rendezvous

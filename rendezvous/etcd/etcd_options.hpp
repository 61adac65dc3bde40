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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/endpoint.hpp"

namespace ddprun::rendezvous {

/// etcd's client port, when an endpoint names none.
inline constexpr int kDefaultEtcdPort = 2379;

/// The defaults of --rdzv-conf's key_prefix and lease_ttl (EtcdConf's, hence EtcdOptions').
inline constexpr std::string_view kDefaultKeyPrefix = "/";
inline constexpr std::chrono::seconds kDefaultLeaseTtl{10};

struct EtcdOptions {
  std::vector<Endpoint> endpoints;  ///< tried in this order; a member that fails moves to the back
  std::string key_prefix{kDefaultKeyPrefix};  ///< always ends with '/'
  bool tls = false;
  std::string cacert;  ///< empty: the system's CA store
  std::string cert;
  std::string key;
  std::string user;
  std::string password;
  std::chrono::seconds lease_ttl{kDefaultLeaseTtl};

  /// "h1:2379,h2:2379" as errors name the members.
  std::string describe_endpoints() const;
};

/// --rdzv-conf's etcd keys, typed where --rdzv-conf is read, once (take_etcd_conf_key). A value
/// that is wrong on its own (protocol, lease_ttl) is kept as its refusal rather than thrown: the keys
/// mean something only to an etcd-v3 rendezvous, where parse_etcd_options raises it in its turn,
/// and other backends ignore them, as torchrun's do.
struct EtcdConf {
  std::string key_prefix{kDefaultKeyPrefix};  ///< always ends with '/'
  std::optional<bool> https;     ///< protocol: https (true) or http (false); nothing when not given
  std::string cacert;
  std::string cert;
  std::string key;
  std::string user;
  std::string password;
  std::chrono::seconds lease_ttl{kDefaultLeaseTtl};
  std::string protocol_refused;   ///< "protocol=grpc is not http or https"; empty when fine
  std::string lease_ttl_refused;  ///< "lease_ttl=1 is not an integer ..."; empty when fine
};

/// Takes KEY=VALUE (one --rdzv-conf entry, VALUE not empty) into `conf` when KEY is one of etcd's
/// keys (a later entry of a key replaces an earlier one, its refusal included); false, and `conf`
/// unchanged, for any other key.
bool take_etcd_conf_key(EtcdConf& conf, std::string_view key, std::string_view value);

/// Parses "h1:2379,h2:2379,[::1]:2379" (a scheme "http://" or "https://" before each is allowed;
/// https turns TLS on) with `conf`. Throws Error naming the text and what is wrong (no endpoint, a
/// bad endpoint, a lease_ttl that is not an integer >= 2, a cert without a key, protocol neither
/// http nor https, http:// members with TLS asked for); callers prefix the flag's name.
EtcdOptions parse_etcd_options(std::string_view endpoints, const EtcdConf& conf);

}  // namespace ddprun::rendezvous

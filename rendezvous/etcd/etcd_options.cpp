#include "rendezvous/etcd/etcd_options.hpp"

#include <charconv>

namespace ddprun::rendezvous {
namespace {

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}


}  // namespace

std::string EtcdOptions::describe_endpoints() const {
  std::string out;
  for (const auto& endpoint : endpoints) {
    if (!out.empty()) out += ",";
    out += format_endpoint(endpoint.host, endpoint.port);
  }
  return out;
}

bool take_etcd_conf_key(EtcdConf& conf, std::string_view key, std::string_view value) {
  const std::string text(value);
  if (key == "key_prefix") {
    conf.key_prefix = text;
    if (conf.key_prefix.empty() || conf.key_prefix.back() != '/') conf.key_prefix += '/';
  } else if (key == "protocol") {
    conf.https.reset();
    conf.protocol_refused.clear();
    if (value == "https" || value == "http") conf.https = value == "https";
    else conf.protocol_refused = "protocol=" + text + " is not http or https";
  } else if (key == "cacert") {
    conf.cacert = text;
  } else if (key == "cert") {
    conf.cert = text;
  } else if (key == "key") {
    conf.key = text;
  } else if (key == "user") {
    conf.user = text;
  } else if (key == "password") {
    conf.password = text;
  } else if (key == "lease_ttl") {
    conf.lease_ttl_refused.clear();
    long long seconds = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (ec != std::errc() || ptr != value.data() + value.size() || seconds < 2 || seconds > 3600) {
      conf.lease_ttl_refused = "lease_ttl=" + text + " is not an integer number of seconds in 2..3600";
    } else {
      conf.lease_ttl = std::chrono::seconds(seconds);
    }
  } else {
    return false;
  }
  return true;
}

EtcdOptions parse_etcd_options(std::string_view endpoints, const EtcdConf& conf) {
  EtcdOptions options;
  bool https_scheme = false;
  bool http_scheme = false;
  std::string_view rest = endpoints;
  while (true) {
    const auto comma = rest.find(',');
    std::string_view item = trimmed(rest.substr(0, comma));
    if (item.starts_with("https://")) {
      https_scheme = true;
      item.remove_prefix(8);
    } else if (item.starts_with("http://")) {
      http_scheme = true;
      item.remove_prefix(7);
    }
    while (item.ends_with('/')) item.remove_suffix(1);
    if (!item.empty()) options.endpoints.push_back(parse_endpoint(item, kDefaultEtcdPort));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (options.endpoints.empty()) {
    throw Error("\"" + std::string(endpoints) + "\" names no etcd member (write HOST[:PORT],HOST[:PORT],...)");
  }

  options.key_prefix = conf.key_prefix;
  options.cacert = conf.cacert;
  options.cert = conf.cert;
  options.key = conf.key;
  options.user = conf.user;
  options.password = conf.password;
  options.tls = https_scheme || !options.cacert.empty() || !options.cert.empty();
  if (!conf.protocol_refused.empty()) throw Error(conf.protocol_refused);
  if (conf.https == true) options.tls = true;
  if (conf.https == false && options.tls) throw Error("protocol=http, but TLS files or an https:// endpoint are given");
  if (http_scheme && options.tls) {
    throw Error(https_scheme ? "mixes http:// and https:// members: one cluster's client ports speak one protocol"
                             : "names http:// members, but TLS is asked for (protocol=https, cacert, cert or key)");
  }
  if (options.cert.empty() != options.key.empty()) {
    throw Error(std::string(options.cert.empty() ? "key" : "cert") + " is given without " +
                (options.cert.empty() ? "cert" : "key") + ": TLS client authentication needs both");
  }
  if (options.password.size() && options.user.empty()) throw Error("password is given without user");
  if (!conf.lease_ttl_refused.empty()) throw Error(conf.lease_ttl_refused);
  options.lease_ttl = conf.lease_ttl;
  return options;
}

}  // namespace ddprun::rendezvous

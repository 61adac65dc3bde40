#include "rendezvous/etcd/etcd_options.hpp"

#include <charconv>

namespace ddprun::rendezvous {
namespace {

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

const std::string* find(const std::map<std::string, std::string>& conf, const char* key) {
  auto it = conf.find(key);
  return it == conf.end() ? nullptr : &it->second;
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

EtcdOptions parse_etcd_options(std::string_view endpoints, const std::map<std::string, std::string>& conf) {
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

  if (const auto* prefix = find(conf, "key_prefix")) {
    options.key_prefix = *prefix;
    if (options.key_prefix.empty() || options.key_prefix.back() != '/') options.key_prefix += '/';
  }
  if (const auto* value = find(conf, "cacert")) options.cacert = *value;
  if (const auto* value = find(conf, "cert")) options.cert = *value;
  if (const auto* value = find(conf, "key")) options.key = *value;
  if (const auto* value = find(conf, "user")) options.user = *value;
  if (const auto* value = find(conf, "password")) options.password = *value;
  options.tls = https_scheme || !options.cacert.empty() || !options.cert.empty();
  if (const auto* protocol = find(conf, "protocol")) {
    if (*protocol == "https") options.tls = true;
    else if (*protocol == "http") options.tls = https_scheme || !options.cacert.empty() || !options.cert.empty();
    else throw Error("protocol=" + *protocol + " is not http or https");
    if (*protocol == "http" && options.tls) throw Error("protocol=http, but TLS files or an https:// endpoint are given");
  }
  if (http_scheme && options.tls) {
    throw Error(https_scheme ? "mixes http:// and https:// members: one cluster's client ports speak one protocol"
                             : "names http:// members, but TLS is asked for (protocol=https, cacert, cert or key)");
  }
  if (options.cert.empty() != options.key.empty()) {
    throw Error(std::string(options.cert.empty() ? "key" : "cert") + " is given without " +
                (options.cert.empty() ? "cert" : "key") + ": TLS client authentication needs both");
  }
  if (options.password.size() && options.user.empty()) throw Error("password is given without user");
  if (const auto* ttl = find(conf, "lease_ttl")) {
    long long seconds = 0;
    auto [ptr, ec] = std::from_chars(ttl->data(), ttl->data() + ttl->size(), seconds);
    if (ec != std::errc() || ptr != ttl->data() + ttl->size() || seconds < 2 || seconds > 3600) {
      throw Error("lease_ttl=" + *ttl + " is not an integer number of seconds in 2..3600");
    }
    options.lease_ttl = std::chrono::seconds(seconds);
  }
  return options;
}

}  // namespace ddprun::rendezvous

#include "launcher/cli/cli_values.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>

#include "launcher/base/errors.hpp"
#include "launcher/base/signal_names.hpp"
#include "launcher/base/text.hpp"
#include "rendezvous/etcd/etcd_options.hpp"

namespace ddprun::launcher {
std::string quote_for_message(std::string_view value) {
  std::string out = "\"";
  for (unsigned char c : value) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char hex[5];
          std::snprintf(hex, sizeof hex, "\\x%02x", c);
          out += hex;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void reject_value(std::string_view text, std::string_view flag, std::string_view why) {
  throw UsageError(std::string(flag) + ": " + quote_for_message(text) + " " + std::string(why));
}

void require_non_empty(std::string_view text, std::string_view flag) {
  if (text.empty()) throw UsageError(std::string(flag) + ": empty value");
}

std::optional<long long> to_integer(std::string_view s) {
  long long value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

std::optional<double> to_number(std::string_view s) {
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

int integer_in(std::string_view text, std::string_view flag, long long low, long long high, std::string_view expected) {
  auto value = to_integer(text);
  if (!value || *value < low || *value > high) reject_value(text, flag, expected);
  return static_cast<int>(*value);
}

bool parse_boolean(std::string_view text, std::string_view flag) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "1" || lower == "true") return true;
  if (lower == "0" || lower == "false") return false;
  reject_value(text, flag, "is not a boolean (1, 0, true or false)");
}

std::pair<int, int> parse_nnodes(std::string_view text, std::string_view flag) {
  static constexpr std::string_view expected = "is not N or MIN:MAX with 0 < MIN <= MAX";
  auto parts = split(text, ':');
  if (parts.size() > 2) reject_value(text, flag, expected);
  auto low = to_integer(parts.front());
  auto high = to_integer(parts.back());
  if (!low || !high || *low <= 0 || *low > *high || *high > kIntMax) reject_value(text, flag, expected);
  return {static_cast<int>(*low), static_cast<int>(*high)};
}

int parse_nproc(std::string_view text, std::string_view flag, const HostFacts& host, int devices_per_worker) {
  std::string_view v = text;
  if (v == "auto") v = host.device_count > 0 ? "gpu" : "cpu";
  if (v == "cpu") return std::max(host.cpu_count, 1);
  if (v == "gpu") {
    if (host.device_count <= 0) {
      reject_value(text, flag,
                   "asks for one worker per GPU, but no CUDA devices are visible (" +
                       (host.device_source.empty() ? std::string("CUDA_VISIBLE_DEVICES") : host.device_source) + ")");
    }
    int workers = host.device_count / std::max(devices_per_worker, 1);
    if (workers == 0) {
      reject_value(text, flag,
                   "gives no worker: " + std::to_string(host.device_count) + " CUDA devices visible, " +
                       std::to_string(devices_per_worker) + " per worker (--devices-per-worker)");
    }
    return workers;
  }
  return integer_in(text, flag, 1, kIntMax, "is not a positive integer, gpu, cpu or auto");
}

StreamSelection parse_streams(std::string_view text, std::string_view flag) {
  static constexpr std::string_view expected =
      "is not 0-3 or LOCAL_RANK:0-3,... (0 none, 1 stdout, 2 stderr, 3 both)";
  auto digit = [&](std::string_view s) {
    if (s.size() != 1 || s[0] < '0' || s[0] > '3') reject_value(text, flag, expected);
    return static_cast<StdStreams>(s[0] - '0');
  };
  StreamSelection selection;
  if (text.find(':') == std::string_view::npos) {
    selection.all = digit(text);
    return selection;
  }
  for (auto item : split(text, ',')) {
    auto colon = item.find(':');
    if (colon == std::string_view::npos) reject_value(text, flag, expected);
    auto rank = to_integer(item.substr(0, colon));
    if (!rank || *rank < 0 || *rank > kIntMax) reject_value(text, flag, expected);
    if (!selection.per_local_rank.emplace(static_cast<int>(*rank), digit(item.substr(colon + 1))).second) {
      reject_value(text, flag, "names local rank " + std::to_string(*rank) + " twice");
    }
  }
  return selection;
}

RdzvConf parse_rdzv_conf(std::string_view text, std::string_view flag, rendezvous::RendezvousSettings& settings) {
  RdzvConf conf;
  if (trim(text).empty()) return conf;
  for (auto item : split(trim(text), ',')) {
    auto eq = item.find('=');
    std::string key(trim(item.substr(0, eq)));
    if (key.empty()) reject_value(text, flag, "is not K=V,K=V (an entry has no key)");
    std::string value(eq == std::string_view::npos ? std::string_view{} : trim(item.substr(eq + 1)));
    if (value.empty()) reject_value(text, flag, "gives no value for " + key + " (write " + key + "=VALUE)");
    try {
      rendezvous::apply_rendezvous_setting(settings, key, value);
    } catch (const rendezvous::SettingError& error) {
      reject_value(text, flag, "sets " + error.key + " to " + error.value + ", not " + error.expected);
    }
    rendezvous::take_etcd_conf_key(conf.etcd, key, value);  // judged by parse_etcd_options, for etcd-v3 only
    conf.given[key] = value;  // torchrun: the last of a repeated key wins
  }
  return conf;
}

std::vector<int> parse_signals(std::string_view text, std::string_view flag) {
  std::vector<int> signals;
  for (auto item : split(text, ',')) {
    item = trim(item);
    if (item.empty()) reject_value(text, flag, "has an empty entry (write names like SIGTERM,SIGINT)");
    auto signo = signal_from_name(item);
    if (!signo) reject_value(text, flag, "has " + quote_for_message(item) + ", which is not a signal name");
    if (*signo == SIGKILL || *signo == SIGSTOP) {
      reject_value(text, flag, "names " + signal_name(*signo) + ", which no process can handle");
    }
    if (*signo == SIGCHLD) {
      // Every worker exit raises it: stopping on it would turn each success into a failure.
      reject_value(text, flag, "names SIGCHLD, which ddprun uses to learn of worker exits");
    }
    if (std::find(signals.begin(), signals.end(), *signo) == signals.end()) signals.push_back(*signo);
  }
  return signals;
}

std::optional<std::set<int>> parse_rank_filter(std::string_view text, std::string_view flag, int nproc) {
  if (trim(text).empty()) return std::nullopt;
  std::set<int> ranks;
  for (auto item : split(text, ',')) {
    auto rank = to_integer(trim(item));
    if (!rank || *rank < 0) reject_value(text, flag, "is not a comma list of local ranks (integers >= 0)");
    if (*rank >= nproc) {
      reject_value(text, flag,
                   "names local rank " + std::to_string(*rank) + ", but there are " + std::to_string(nproc) +
                       " workers (0.." + std::to_string(nproc - 1) + ")");
    }
    ranks.insert(static_cast<int>(*rank));
  }
  return ranks;
}

void check_prefix_template(std::string_view text, std::string_view flag) {
  static const std::set<std::string, std::less<>> known{"role_name", "rank", "local_rank", "hostname"};
  std::string_view t = text;
  for (auto at = t.find("${"); at != std::string_view::npos; at = t.find("${", at)) {
    auto close = t.find('}', at);
    if (close == std::string_view::npos) reject_value(text, flag, "has \"${\" without a closing \"}\"");
    auto name = t.substr(at + 2, close - at - 2);
    if (!known.contains(name)) {
      reject_value(text, flag,
                   "has the unknown placeholder ${" + std::string(name) +
                       "} (known: ${role_name} ${rank} ${local_rank} ${hostname})");
    }
    at = close + 1;
  }
}

rendezvous::Endpoint parse_endpoint(std::string_view text, int default_port, std::string_view flag) {
  text = trim(text);
  if (text.empty()) return {"localhost", default_port};
  std::string bracketed;  // the text the rendezvous layer parses: IPv6 always in brackets
  if (!text.starts_with('[') && std::count(text.begin(), text.end(), ':') > 1) {
    // torchrun's parse_rendezvous_endpoint splits an unbracketed endpoint at its last ':', so
    // "::1:29400" is [::1]:29400. The host that gives must then be an IPv6 address: "fe80::1"
    // would be host "fe80:" port 1, which torchrun only finds out when it cannot connect.
    auto colon = text.rfind(':');
    std::string_view host = text.substr(0, colon);
    if (!rendezvous::is_ipv6_literal(host)) {
      reject_value(text, flag,
                   "is split at its last ':' (as torchrun does) into host " + quote_for_message(host) +
                       ", which is not an IPv6 address (write [v6addr] or [v6addr]:PORT)");
    }
    bracketed.append("[").append(host).append("]").append(text.substr(colon));
  } else {
    bracketed = std::string(text);
  }
  rendezvous::Endpoint endpoint;
  try {
    endpoint = rendezvous::parse_endpoint(bracketed, default_port);
  } catch (const rendezvous::Error& error) {
    reject_value(text, flag, std::string("is not HOST[:PORT]: ") + error.what());
  }
  const bool v6 = bracketed.starts_with('[');
  const bool host_ok = std::all_of(endpoint.host.begin(), endpoint.host.end(), [&](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '-' || c == '_' || (v6 && (c == ':' || c == '%'));
  });
  if (!host_ok) reject_value(text, flag, "is not HOST[:PORT]");
  return endpoint;
}

}  // namespace ddprun::launcher

#include "launcher/observe/status_request.hpp"

#include <boost/asio/ip/address.hpp>
#include <cctype>

#include "rendezvous/auth.hpp"

namespace ddprun::launcher {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      int high = hex_digit(text[i + 1]);
      int low = hex_digit(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

/// The token a request carries: `Authorization: Bearer T` first, else `?token=T`.
std::optional<std::string> presented_token(const StatusRequestFacts& request) {
  std::string_view auth = request.authorization;
  constexpr std::string_view kBearer = "bearer ";
  if (auth.size() > kBearer.size() && equals_ignoring_case(auth.substr(0, kBearer.size()), kBearer)) {
    auth.remove_prefix(kBearer.size());
    while (!auth.empty() && auth.front() == ' ') auth.remove_prefix(1);
    while (!auth.empty() && auth.back() == ' ') auth.remove_suffix(1);
    return std::string(auth);
  }
  return query_parameter(request.target, "token");
}

}  // namespace

std::string_view target_path(std::string_view target) { return target.substr(0, target.find('?')); }

std::optional<std::string> query_parameter(std::string_view target, std::string_view name) {
  auto question = target.find('?');
  if (question == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(question + 1);
  if (auto hash = query.find('#'); hash != std::string_view::npos) query = query.substr(0, hash);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    auto eq = pair.find('=');
    auto key = percent_decode(pair.substr(0, eq));
    if (!key || *key != name) continue;
    return eq == std::string_view::npos ? std::optional<std::string>("") : percent_decode(pair.substr(eq + 1));
  }
  return std::nullopt;
}

bool is_loopback_address(std::string_view address) {
  if (equals_ignoring_case(address, "localhost")) return true;
  std::string text(address);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  boost::system::error_code error;
  auto parsed = boost::asio::ip::make_address(text, error);
  if (error) return false;
  if (parsed.is_v6() && parsed.to_v6().is_v4_mapped()) {
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, parsed.to_v6()).is_loopback();
  }
  return parsed.is_loopback();
}

bool is_loopback_host_header(std::string_view host) {
  if (host.empty()) return false;
  std::string_view name = host;
  if (name.front() == '[') {
    auto close = name.find(']');
    if (close == std::string_view::npos) return false;
    std::string_view rest = name.substr(close + 1);
    name = name.substr(0, close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
  } else if (auto colon = name.find(':'); colon != std::string_view::npos) {
    name = name.substr(0, colon);
  }
  if (name.empty()) return false;
  return is_loopback_address(name);
}

StatusDecision decide_status_request(const StatusRequestFacts& request, const std::optional<std::string>& token) {
  if (!request.unix_socket && !request.fetch_site.empty() && !equals_ignoring_case(request.fetch_site, "same-origin") &&
      !equals_ignoring_case(request.fetch_site, "none")) {
    return {StatusVerdict::forbidden_origin};
  }
  if (!request.unix_socket) {
    if (token) {
      auto given = presented_token(request);
      if (!given || !rendezvous::auth::equal_constant_time(*given, *token)) return {StatusVerdict::unauthorized};
    } else if (!is_loopback_host_header(request.host)) {
      return {StatusVerdict::forbidden_host};
    }
  }
  std::string_view path = target_path(request.target);
  std::optional<StatusResource> resource;
  if (path == "/" || path == "/index.html") resource = StatusResource::page;
  if (path == "/api/status") resource = StatusResource::status;
  if (path == "/api/stacks") resource = StatusResource::stacks;
  if (path == "/metrics") resource = StatusResource::metrics;
  if (!resource) return {StatusVerdict::not_found};
  if (request.method != "GET" && request.method != "HEAD") return {StatusVerdict::method_not_allowed};
  return {StatusVerdict::serve, *resource};
}

}  // namespace ddprun::launcher

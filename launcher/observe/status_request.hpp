#pragma once
/// What the status endpoint does with one request, decided from the request's facts alone: which
/// resource it names, and whether the client may have it. Pure, so that the rules (paths,
/// methods, the token, the Host header) are a table test; status_http.cpp performs the answer.
///
/// Who may ask:
///  - the Unix socket: anyone who can connect (the socket is owner-only and the server checks
///    the peer's uid), no token;
///  - TCP with the store token configured (DDPRUN_STORE_TOKEN[_FILE]): the token, as
///    `Authorization: Bearer TOKEN` or `?token=TOKEN` (the page passes its own on);
///  - TCP on loopback without a token: anyone on this machine, but the Host header must name a
///    loopback host (localhost, 127.x.x.x, [::1]), so that a web page in a browser cannot read
///    the endpoint through DNS rebinding.
/// And on TCP, whatever the token: a browser's request made by another site's page
/// (`Sec-Fetch-Site` other than same-origin or none) is refused, so that a page elsewhere cannot
/// make the agent capture stacks (a GET it cannot read, but that still runs).
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::launcher {

enum class StatusResource { page, status, stacks, metrics };

enum class StatusVerdict {
  serve,               ///< 200 with the resource
  not_found,           ///< 404
  method_not_allowed,  ///< 405: only GET and HEAD
  unauthorized,        ///< 401: the token is required and missing or wrong
  forbidden_host,      ///< 403: Host header not a loopback name on an unauthenticated TCP endpoint
  forbidden_origin,    ///< 403: a browser says another site's page made the request
};

struct StatusRequestFacts {
  std::string_view method;         ///< "GET"
  std::string_view target;         ///< "/api/status?token=..."
  std::string_view authorization;  ///< the Authorization header, empty when absent
  std::string_view host;           ///< the Host header, empty when absent
  std::string_view fetch_site;     ///< the Sec-Fetch-Site header, empty when absent
  bool unix_socket = false;        ///< arrived on the owner-only Unix socket
};

struct StatusDecision {
  StatusVerdict verdict = StatusVerdict::not_found;
  StatusResource resource = StatusResource::page;  ///< meaningful for serve
};

/// `token`: the store token when one is configured (then every TCP request must carry it).
StatusDecision decide_status_request(const StatusRequestFacts& request, const std::optional<std::string>& token);

/// The path of a request target without its query ("/api/status?x=1" -> "/api/status").
std::string_view target_path(std::string_view target);

/// The value of query parameter `name` in `target`, percent-decoded ('+' is a space); nothing
/// when absent or malformed.
std::optional<std::string> query_parameter(std::string_view target, std::string_view name);

/// Whether a Host header names this machine's loopback: localhost, 127.0.0.0/8 or [::1], with or
/// without a port.
bool is_loopback_host_header(std::string_view host);

/// Whether `address` (an IP address or name as given to --status-host) is loopback: localhost,
/// 127.0.0.0/8, ::1.
bool is_loopback_address(std::string_view address);

}  // namespace ddprun::launcher

#pragma once
/// Endpoints and addresses of the rendezvous: parsing `host[:port]` (IPv6 as `[addr]:port`), the
/// address a node advertises, and whether an endpoint names this machine. Addresses are always
/// numeric interface addresses: a node is never named by a reverse-resolved hostname, which may
/// resolve elsewhere (or nowhere) on the other nodes.
#include <string>
#include <string_view>

#include "rendezvous/error.hpp"

namespace ddprun::rendezvous {

struct Endpoint {
  std::string host;  ///< a name or an address; IPv6 without brackets
  int port = 0;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

/// "host", "host:port", "[v6]", "[v6]:port", or a bare IPv6 address ("::1", "fd00::2": more than
/// one colon and no brackets means no port). A missing port is `default_port`. Throws
/// Error whose message starts with `text` in quotes and says what is wrong (empty
/// host, empty port after ':', port not a number or not in 0..65535, unbalanced brackets, several
/// ':' without brackets that do not make an IPv6 address); callers prefix the flag's name.
Endpoint parse_endpoint(std::string_view text, int default_port);

/// "host:port", or "[v6]:port" for an IPv6 address.
std::string format_endpoint(std::string_view host, int port);

/// "[addr]" -> "addr"; anything else unchanged: a host as the user wrote it, as sockets take it.
std::string_view without_brackets(std::string_view host);

/// True for a literal IPv6 address (with or without brackets).
bool is_ipv6_literal(std::string_view host);

/// The numeric address of this machine's interface that routes to `host:port`: a UDP socket is
/// connected there (no packet is sent) and its local address read back. `host` may be a name (or a
/// bracketed IPv6 address); it is resolved first and its addresses are tried in the resolver's order
/// (RFC 6724: IPv6 first when this machine has an IPv6 route, IPv4 otherwise) until one connects.
/// Throws Error("cannot resolve H: ..." / "no route to H: ...").
std::string local_address_toward(const std::string& host, int port);

/// True when `host` is this machine: a loopback address, an address of one of its interfaces, this
/// machine's hostname, or a name that resolves to one of those addresses. Never throws: a name that
/// does not resolve is not this machine.
bool is_this_machine(const std::string& host);

/// The address to bind to accept connections on every interface of `host`'s family: "::" for an
/// IPv6 address, else "0.0.0.0".
std::string wildcard_address_for(std::string_view host);

}  // namespace ddprun::rendezvous

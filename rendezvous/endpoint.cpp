#include "rendezvous/endpoint.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <vector>

namespace ddprun::rendezvous {
namespace {

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

Error bad_endpoint(std::string_view text, const std::string& why) {
  return Error(quoted(text) + ": " + why);
}

int parse_port(std::string_view text, std::string_view port) {
  if (port.empty()) throw bad_endpoint(text, "the port after ':' is empty");
  std::string_view digits = port.front() == '-' ? port.substr(1) : port;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw bad_endpoint(text, "port " + quoted(port) + " is not a number");
  }
  long long value = 0;
  auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (error != std::errc() || end != port.data() + port.size() || value < 0 || value > 65535) {
    throw bad_endpoint(text, "port " + std::string(port) + " is not in 0..65535");
  }
  return static_cast<int>(value);
}

struct AddrInfoDeleter {
  void operator()(addrinfo* list) const { freeaddrinfo(list); }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoDeleter>;

/// getaddrinfo for UDP (one result per address). No AI_ADDRCONFIG: it hides "::1" on machines whose
/// only IPv6 address is the loopback. Returns the getaddrinfo error code (0 on success).
int resolve(const std::string& host, const char* service, AddrInfoList& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* list = nullptr;
  int status = getaddrinfo(host.c_str(), service, &hints, &list);
  out.reset(status == 0 ? list : nullptr);
  return status;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string numeric_address(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* bytes = address->sa_family == AF_INET6
                          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr)
                          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(address)->sin_addr);
  if (inet_ntop(address->sa_family, bytes, text, sizeof text) == nullptr) return {};
  return text;
}

/// An IP address as comparable bytes: IPv4 (also IPv4-mapped IPv6) as 4 bytes, IPv6 as 16, so
/// that "::ffff:10.0.0.1" and "10.0.0.1" compare equal. Empty for other families.
std::string address_bytes(const sockaddr* address) {
  if (address == nullptr) return {};
  if (address->sa_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in*>(address)->sin_addr;
    return std::string(reinterpret_cast<const char*>(&in), sizeof in);
  }
  if (address->sa_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&in6)) return std::string(reinterpret_cast<const char*>(&in6) + 12, 4);
    return std::string(reinterpret_cast<const char*>(&in6), sizeof in6);
  }
  return {};
}

bool is_loopback(const std::string& bytes) {
  if (bytes.size() == 4) return static_cast<unsigned char>(bytes[0]) == 127;
  if (bytes.size() == 16) return bytes == std::string(15, '\0') + '\1';
  return false;
}

/// Every address of every interface of this machine, as address_bytes().
std::vector<std::string> interface_addresses() {
  std::vector<std::string> addresses;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return addresses;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    std::string bytes = address_bytes(entry->ifa_addr);
    if (!bytes.empty()) addresses.push_back(std::move(bytes));
  }
  freeifaddrs(list);
  return addresses;
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](unsigned char x, unsigned char y) {
    return std::tolower(x) == std::tolower(y);
  });
}

std::string this_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return {};
  return name;
}

}  // namespace

std::string_view without_brackets(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

Endpoint parse_endpoint(std::string_view text, int default_port) {
  Endpoint endpoint;
  endpoint.port = default_port;
  std::string_view host = text;
  std::string_view port;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    std::size_t closing = text.find(']');
    if (closing == std::string_view::npos) throw bad_endpoint(text, "'[' without a closing ']'");
    host = text.substr(1, closing - 1);
    std::string_view rest = text.substr(closing + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') throw bad_endpoint(text, "expected ':port' after ']'");
      port = rest.substr(1);
      has_port = true;
    }
  } else {
    std::size_t first = text.find(':');
    if (first != std::string_view::npos && text.find(':', first + 1) == std::string_view::npos) {
      host = text.substr(0, first);
      port = text.substr(first + 1);
      has_port = true;
    } else if (first != std::string_view::npos && !is_ipv6_literal(text)) {
      // Several ':' without brackets can only be an IPv6 address; anything else is a typo.
      throw bad_endpoint(text, "not an IPv6 address, and a host:port has one ':' (IPv6 with a port: [addr]:port)");
    }
  }
  if (host.find_first_of("[]") != std::string_view::npos) throw bad_endpoint(text, "unbalanced brackets");
  if (host.empty()) throw bad_endpoint(text, "the host is empty");
  endpoint.host = std::string(host);
  if (has_port) endpoint.port = parse_port(text, port);
  return endpoint;
}

std::string format_endpoint(std::string_view host, int port) {
  std::string text = !host.empty() && host.front() != '[' && is_ipv6_literal(host)
                         ? "[" + std::string(host) + "]"
                         : std::string(host);
  return text + ":" + std::to_string(port);
}

bool is_ipv6_literal(std::string_view host) {
  host = without_brackets(host);
  // A zone ("fe80::1%eth0") names the interface of a link-local address; inet_pton rejects it.
  std::size_t zone = host.find('%');
  if (zone != std::string_view::npos) {
    if (zone + 1 == host.size()) return false;
    host = host.substr(0, zone);
  }
  std::string address(host);
  in6_addr parsed{};
  return inet_pton(AF_INET6, address.c_str(), &parsed) == 1;
}

std::string local_address_toward(const std::string& host, int port) {
  std::string name(without_brackets(host));
  AddrInfoList results;
  if (int status = resolve(name, std::to_string(port).c_str(), results); status != 0) {
    throw Error("cannot resolve " + name + ": " + gai_strerror(status));
  }
  // The resolver's order (RFC 6724) already puts the addresses this machine has a route to first.
  int last_error = 0;
  for (addrinfo* result = results.get(); result != nullptr; result = result->ai_next) {
    Fd fd(::socket(result->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      last_error = errno;
      continue;
    }
    // connect() on UDP sends nothing: the kernel only picks the route and the source address.
    if (::connect(fd.get(), result->ai_addr, result->ai_addrlen) != 0) {
      last_error = errno;
      continue;
    }
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0) {
      last_error = errno;
      continue;
    }
    std::string address = numeric_address(reinterpret_cast<const sockaddr*>(&local));
    if (!address.empty()) return address;
  }
  throw Error("no route to " + name + (last_error != 0 ? ": " + std::string(std::strerror(last_error)) : ""));
}

bool is_this_machine(const std::string& host) {
  std::string name(without_brackets(host));
  if (name.empty()) return false;
  if (equal_ignoring_case(name, this_host_name())) return true;
  AddrInfoList results;
  if (resolve(name, nullptr, results) != 0) return false;
  std::vector<std::string> local = interface_addresses();
  for (addrinfo* result = results.get(); result != nullptr; result = result->ai_next) {
    std::string bytes = address_bytes(result->ai_addr);
    if (bytes.empty()) continue;
    if (is_loopback(bytes) || std::find(local.begin(), local.end(), bytes) != local.end()) return true;
  }
  return false;
}

std::string wildcard_address_for(std::string_view host) { return is_ipv6_literal(host) ? "::" : "0.0.0.0"; }

}  // namespace ddprun::rendezvous

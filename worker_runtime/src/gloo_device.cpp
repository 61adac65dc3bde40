#include "gloo_device.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <gloo/transport/tcp/device.h>
#include <optional>
#include <string>

#include "ddprun/error.hpp"

namespace ddprun::detail {
namespace {

struct Setting {
  std::string name;
  std::string value;
};

std::optional<Setting> interface_setting() {
  for (const char* name : {"DDPRUN_GLOO_INTERFACE", "GLOO_SOCKET_IFNAME"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    std::string text = value;
    if (std::string(name) == "GLOO_SOCKET_IFNAME") text = text.substr(0, text.find(','));
    return Setting{name, text};
  }
  return std::nullopt;
}

/// The source address of a route to host:port: connect() on a UDP socket sends nothing but makes the
/// kernel pick the route and the address, which getsockname() then reads back.
std::optional<std::string> local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* results = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &results) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (addrinfo* result = results; result != nullptr && !found; result = result->ai_next) {
    int fd = ::socket(result->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (::connect(fd, result->ai_addr, result->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* address = local.ss_family == AF_INET6
                                ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                                : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (inet_ntop(local.ss_family, address, text, sizeof text) != nullptr) found = text;
    }
    ::close(fd);
  }
  freeaddrinfo(results);
  return found;
}

}  // namespace

std::shared_ptr<gloo::transport::Device> create_gloo_device(const Identity& identity) {
  gloo::transport::tcp::attr attr;
  std::string chosen;
  std::string hint;
  if (auto setting = interface_setting()) {
    if (if_nametoindex(setting->value.c_str()) != 0) {
      attr.iface = setting->value;
    } else {
      attr.hostname = setting->value;
      hint = " (no network interface here has that name, so it was taken as a host name or address)";
    }
    chosen = setting->name + "=" + setting->value;
  } else if (auto address = local_address_towards(identity.master_addr, identity.master_port)) {
    attr.hostname = *address;
    chosen = *address + " (the local address towards MASTER_ADDR " + identity.master_addr + ")";
  } else {
    throw Error("cannot find a local address that reaches MASTER_ADDR=" + identity.master_addr +
                " for the gloo transport; set DDPRUN_GLOO_INTERFACE to a network interface or address");
  }
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& error) {
    throw Error("cannot create the gloo transport on " + chosen + hint + ": " + error.what());
  }
}

}  // namespace ddprun::detail

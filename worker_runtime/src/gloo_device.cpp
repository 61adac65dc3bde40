#include "gloo_device.hpp"

#include <net/if.h>

#include <cstdlib>
#include <exception>
#include <gloo/transport/tcp/device.h>
#include <optional>
#include <string>

#include "ddprun/error.hpp"
#include "rendezvous/endpoint.hpp"

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
  } else {
    try {
      attr.hostname = rendezvous::local_address_toward(identity.master_addr, identity.master_port);
    } catch (const std::exception& error) {
      throw Error("cannot find a local address that reaches MASTER_ADDR=" + identity.master_addr +
                  " for the gloo transport (" + error.what() +
                  "); set DDPRUN_GLOO_INTERFACE to a network interface or address");
    }
    chosen = attr.hostname + " (the local address towards MASTER_ADDR " + identity.master_addr + ")";
  }
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& error) {
    throw Error("cannot create the gloo transport on " + chosen + hint + ": " + error.what());
  }
}

}  // namespace ddprun::detail

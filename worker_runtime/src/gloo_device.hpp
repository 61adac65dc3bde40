#pragma once
/// Where a rank's gloo transport listens, and the device that does.
#include <gloo/transport/device.h>
#include <memory>

#include "ddprun/identity.hpp"

namespace ddprun::detail {

/// A gloo TCP device bound to, in order of preference:
///   DDPRUN_GLOO_INTERFACE, else GLOO_SOCKET_IFNAME (PyTorch's; its first name): a network interface
///     name ("eth0"), or, when no interface has that name, a host name or address to bind;
///   else the local address the kernel routes MASTER_ADDR through: the address peers on other nodes
///     can reach (the master's node reaches itself too), 127.0.0.1 for a loopback master.
/// Throws ddprun::Error naming the setting or address when the device cannot be created.
std::shared_ptr<gloo::transport::Device> create_gloo_device(const Identity& identity);

}  // namespace ddprun::detail

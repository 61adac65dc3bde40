#pragma once
/// RdzvBackend: `--rdzv-backend`, the one definition of the backends and of their names. The CLI
/// turns the flag's text into it once (backend_named); everything after holds the enum, and every
/// message, `-v` line and stored job shape spells it with backend_name. Pure.
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::rendezvous {

/// static: fixed membership, ranks from --node-rank, node 0 hosts the store on --master-port;
/// c10d: nodes join rounds at a store on --rdzv-endpoint; etcd_v3: the same rounds in an etcd
/// cluster (--rdzv-endpoint lists its members), which no agent hosts.
enum class RdzvBackend { static_, c10d, etcd_v3 };

inline constexpr std::array<RdzvBackend, 3> kRdzvBackends = {RdzvBackend::static_, RdzvBackend::c10d,
                                                             RdzvBackend::etcd_v3};

/// "static", "c10d" or "etcd-v3": the backend as the flag spells it.
constexpr std::string_view backend_name(RdzvBackend backend) {
  switch (backend) {
    case RdzvBackend::static_: return "static";
    case RdzvBackend::c10d: return "c10d";
    case RdzvBackend::etcd_v3: return "etcd-v3";
  }
  return "static";
}

/// The backend `name` spells exactly (backend_name's inverse); nothing for any other text.
constexpr std::optional<RdzvBackend> backend_named(std::string_view name) {
  for (RdzvBackend backend : kRdzvBackends) {
    if (backend_name(backend) == name) return backend;
  }
  return std::nullopt;
}

/// "static, c10d, etcd-v3": every backend's name, for messages that list them.
inline std::string backend_names() {
  std::string names;
  for (RdzvBackend backend : kRdzvBackends) {
    if (!names.empty()) names += ", ";
    names += backend_name(backend);
  }
  return names;
}

}  // namespace ddprun::rendezvous

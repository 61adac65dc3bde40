#include "launcher/fleet_rule.hpp"

#include "launcher/errors.hpp"
#include "launcher/signal_names.hpp"

namespace ddprun::launcher {

std::string describe_node_status(int status) {
  if (status == kSshFailed) return "its ssh connection failed or was lost (ssh exit 255)";
  if (status > 128 && status < 128 + 65) {
    return "ended by " + signal_name(status - 128) + " (exit " + std::to_string(status) + ")";
  }
  return "exit " + std::to_string(status);
}

std::string describe_node_end(const NodeEnd& end) {
  return "node " + std::to_string(end.node) + " (" + end.host + "): " + describe_node_status(end.status);
}

int fleet_exit_status(std::optional<int> stopped_by_signal, const std::vector<NodeEnd>& ends) {
  if (stopped_by_signal) return exit_status_for_signal(*stopped_by_signal);
  for (const auto& end : ends) {
    if (end.status != 0) return kExitJobFailed;
  }
  return kExitSuccess;
}

}  // namespace ddprun::launcher

#include "launcher/fleet/fleet_rule.hpp"

#include "launcher/base/errors.hpp"
#include "launcher/base/signal_names.hpp"

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

NodeEndVerdict judge_node_end(const NodeEnd& end, const FleetShape& shape, int others) {
  if (end.status == 0) return NodeEndVerdict::finished;
  const bool lost = end.status == kSshFailed || end.status > 128;
  if (lost && shape.elastic && shape.store_node != end.node && others >= shape.min_nodes) {
    return NodeEndVerdict::go_on_without;
  }
  return NodeEndVerdict::job_failed;
}

std::string describe_going_on(const FleetShape& shape, int others) {
  return "; the job goes on with the other " + std::to_string(others) + (others == 1 ? " node" : " nodes") + " (--nnodes=" + std::to_string(shape.min_nodes) + ":" +
         std::to_string(shape.max_nodes) + ")";
}

}  // namespace ddprun::launcher

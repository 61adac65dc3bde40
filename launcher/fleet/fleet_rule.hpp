#pragma once
/// The launching side's verdicts on a job over ssh, as pure functions: what a node's end means
/// (its ssh's exit status), the line that says so, and the launcher's exit status.
#include <optional>
#include <string>
#include <vector>

namespace ddprun::launcher {

/// ddprun's exit status when the pre-flight found a host it cannot use: nothing was started.
inline constexpr int kExitHostsUnreachable = 3;

/// ssh's own failure (connection refused, lost, authentication): not the remote command's status.
inline constexpr int kSshFailed = 255;

/// How one host's agent ended, as the launcher saw its ssh end.
struct NodeEnd {
  int node = 0;
  std::string host;
  int status = 0;  ///< ssh's exit status; 128+N when ssh itself died of signal N
};

/// "exit 1", "its ssh connection failed or was lost (ssh exit 255)", "ended by SIGHUP (exit 129)".
std::string describe_node_status(int status);

/// "node 1 (10.0.0.2): exit 1".
std::string describe_node_end(const NodeEnd& end);

/// The launcher's exit status: 128+N when a signal N stopped it, else 0 when every node succeeded,
/// else 1 (the job failed: a node failed, or its ssh did). `ends` leaves out the nodes the job
/// went on without.
int fleet_exit_status(std::optional<int> stopped_by_signal, const std::vector<NodeEnd>& ends);

/// What a job over ssh can lose: elastic rounds (c10d, etcd-v3) re-form without a lost node, as
/// long as MIN nodes are left and the lost one does not host the rendezvous store.
struct FleetShape {
  bool elastic = false;
  int min_nodes = 1;
  int max_nodes = 1;
  std::optional<int> store_node;  ///< the node whose agent hosts the store (c10d at the first host)
};

enum class NodeEndVerdict { finished, job_failed, go_on_without };

/// A node's end while the job runs: finished (exit 0); go_on_without when the node was lost (its
/// ssh failed, exit 255, or it died of a signal: not an agent that judged the job failed, exit
/// 1..128) in an elastic job, does not host the store, and the `others` left (running, or
/// finished well) are at least MIN; job_failed otherwise.
NodeEndVerdict judge_node_end(const NodeEnd& end, const FleetShape& shape, int others);

/// "; the job goes on with the other 2 nodes (--nnodes=2:3)".
std::string describe_going_on(const FleetShape& shape, int others);

}  // namespace ddprun::launcher

#pragma once
/// NetnsLab: a few "machines" on one host for multi-node tests. Each node is a network namespace
/// with its own address on one private subnet; the nodes meet on a bridge in the host namespace
/// through veth pairs, so one node's link can be cut (its host-side veth set down) and restored.
///
/// Names carry the creating process's pid (`ddpmn<pid>x<k>n<i>` for namespaces, `dmb<pid>x<k>` for
/// the bridge, `dmh<pid>x<k>n<i>` for the host-side veths), so that a lab left behind by a crashed
/// test run is recognized and removed by the next lab (only when that pid is gone), and two test
/// processes never touch each other's labs.
///
/// Needs root and iproute2; create() says why not otherwise, for GTEST_SKIP.
#include <memory>
#include <string>
#include <vector>

namespace ddprun::testing {

/// What a finished command printed (stdout and stderr together) and its exit status.
struct CommandResult {
  int status = -1;  ///< exit code, 128+N for signal N, -1 when it could not run
  std::string output;
};

/// Runs argv (argv[0] a path) to its end.
CommandResult run_command(const std::vector<std::string>& argv);

class NetnsLab {
 public:
  /// Builds `nodes` namespaces on one bridge, each with `lo` and its veth up and an address.
  /// Returns null with `why_not` set when that is impossible here (not root, no `ip`, no namespaces);
  /// what was made before the failure is removed again.
  static std::unique_ptr<NetnsLab> create(int nodes, std::string& why_not);
  /// Removes every namespace and link it made. Processes still running inside a namespace keep it
  /// alive, so end them first (declare the lab before the Launch objects that run in it).
  ~NetnsLab();
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  int size() const { return static_cast<int>(namespaces_.size()); }
  const std::string& namespace_name(int node) const { return namespaces_.at(node); }
  /// The node's IPv4 address, e.g. 10.213.7.1.
  const std::string& address(int node) const { return addresses_.at(node); }
  /// argv that runs `command` inside the node's namespace (`ip netns exec NS ...`, which execs in
  /// place: the pid of a process started with it is the command's).
  std::vector<std::string> in_node(int node, const std::vector<std::string>& command) const;
  /// Takes the node's link down (its host-side veth): its packets go nowhere, no connection is reset.
  void cut(int node);
  /// Brings the node's link back up.
  void restore(int node);

  /// Every namespace and link name this lab made, to check that the destructor removed them.
  std::vector<std::string> names() const;
  /// Removes namespaces, bridges and veths whose names follow the lab scheme but whose creating
  /// process is gone (best effort).
  static void remove_stale(const std::string& ip);

 private:
  NetnsLab() = default;
  std::string ip_;
  std::string bridge_;
  std::vector<std::string> namespaces_;
  std::vector<std::string> host_veths_;
  std::vector<std::string> addresses_;
};

/// The path of iproute2's `ip`, empty when there is none.
std::string ip_binary();
/// `ip netns list` and `ip -o link show` output together, to look for names.
std::string netns_and_links();

}  // namespace ddprun::testing

#pragma once
/// SlurmCluster: a real Slurm (Debian's munge, slurmctld, slurmd) started by a test, on its own
/// ports, key, socket, state, spool and log folders under /tmp/ddprun-slurm-<pid>-<k>, and stopped
/// by it. Either one node on this machine (its own hostname on 127.0.0.1), or a controller in a
/// NetnsLab's node 0 and one slurmd in each other lab node, each in its own network, UTS (its own
/// hostname) and mount namespace (its own /etc/hosts naming every node, as a cluster's DNS would).
///
/// Every daemon, and through srun every job step, carries SLURM_CONF=<this cluster's slurm.conf>
/// in its environment (slurmd gives it to slurmstepd and the tasks): the destructor ends every
/// process that carries it, so nothing of the cluster outlives the test, also when a step hangs.
/// A cluster left by a crashed test process is recognized by its folder's pid and ended likewise.
///
/// Needs root and the Debian packages; start() says why not otherwise, for GTEST_SKIP.
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "netns_lab.hpp"

namespace ddprun::testing {

class SlurmCluster {
 public:
  /// One node, this machine under its own hostname, controller and slurmd on free loopback ports.
  static std::unique_ptr<SlurmCluster> start_local(std::string& why_not);
  /// The controller in lab node 0 (hostname `dsctl`), a slurmd in each of lab nodes 1.. named
  /// dsn1, dsn2, ... (Slurm lists them as dsn[1-N]). The lab must outlive the cluster.
  /// `gpus_per_node` > 0: each node has that many GPUs as Slurm's gres/gpu (gres.conf), so that
  /// steps get SLURM_STEP_GPUS and CUDA_VISIBLE_DEVICES as on a GPU cluster; their device files
  /// are stand-ins (the null device's numbers), which nothing opens: no cgroup constrains devices.
  static std::unique_ptr<SlurmCluster> start_in_lab(const NetnsLab& lab, std::string& why_not, int gpus_per_node = 0);
  /// Ends every process of the cluster (steps, tasks, daemons) and removes its folder.
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  /// argv that runs a Slurm client command (srun, sbatch, sinfo, ...) where it reaches the
  /// controller (lab node 0, or here), with SLURM_CONF set.
  std::vector<std::string> client(const std::vector<std::string>& command) const;
  /// The compute nodes' names, in Slurm's order.
  const std::vector<std::string>& node_names() const { return node_names_; }
  const std::string& folder() const { return dir_; }
  /// The daemons' logs, for failure messages.
  std::string logs() const;

 private:
  SlurmCluster() = default;
  bool start_munge(std::string& why_not);
  bool wait_until_idle(std::string& why_not);
  pid_t spawn(const std::vector<std::string>& argv, const std::string& log_name);
  void stop_everything();

  std::string dir_;
  std::string conf_;
  const NetnsLab* lab_ = nullptr;
  std::vector<std::string> node_names_;
  std::vector<pid_t> daemons_;  ///< munged first, then slurmctld, then each slurmd
};

}  // namespace ddprun::testing

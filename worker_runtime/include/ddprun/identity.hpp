#pragma once
/// Who am I: a worker's place in the job, read from the environment its launcher left — ddprun and
/// torchrun, else Open MPI's mpirun, else Slurm's srun, else a PMI launcher, else a world of one.
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun {

enum class Launcher { torchrun, open_mpi, slurm, pmi, none };

std::string_view launcher_name(Launcher launcher);  ///< "torchrun", "Open MPI", "Slurm", "PMI", "none"

struct Identity {
  Launcher launcher = Launcher::none;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";  ///< where the job's store listens
  int master_port = 29500;
  /// True: the launcher's agent serves the store (ddprun, torchrun static). False: rank 0 hosts it.
  bool agent_store = false;
  int restart_count = 0;
  std::string run_id = "none";
};

/// Reads the identity from `env` (a copy of the environment). Throws ddprun::Error naming the
/// variable when one is missing, malformed or inconsistent (e.g. RANK >= WORLD_SIZE).
Identity identity_from(const std::map<std::string, std::string>& env);

/// identity_from(this process's environment).
Identity identity_from_environment();

/// Slurm's compressed host lists: "node[01-03,07],gpu5" -> node01 node02 node03 node07 gpu5.
/// Throws ddprun::Error on a malformed list.
std::vector<std::string> expand_slurm_nodelist(std::string_view nodelist);

}  // namespace ddprun

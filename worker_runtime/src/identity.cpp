#include "ddprun/identity.hpp"

// Which launcher, and what each one implies (the first that matches wins):
//   torchrun / ddprun / env://  RANK or WORLD_SIZE or TORCHELASTIC_RUN_ID set. LOCAL_RANK and
//                               LOCAL_WORLD_SIZE default to RANK/WORLD_SIZE (one node) unless
//                               TORCHELASTIC_RUN_ID is set, which requires them and MASTER_ADDR/PORT.
//                               agent_store = (TORCHELASTIC_USE_AGENT_STORE == "True"), as PyTorch.
//                               Default store 127.0.0.1:29500 (torchrun's --master-port default).
//   Open MPI (mpirun)           OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}. Store 127.0.0.1:29500;
//                               across nodes MASTER_ADDR is required (mpirun does not say where rank 0 is).
//   Slurm (srun)                SLURM_PROCID, SLURM_STEP_NUM_TASKS|SLURM_NTASKS|SLURM_NPROCS,
//                               SLURM_LOCALID, SLURM_NODEID, local size from
//                               SLURM_STEP_TASKS_PER_NODE|SLURM_TASKS_PER_NODE ("2(x3),1", indexed by
//                               SLURM_NODEID)|SLURM_NTASKS_PER_NODE. Store on the first host of
//                               SLURM_STEP_NODELIST|SLURM_JOB_NODELIST|SLURM_NODELIST, port
//                               29500 + SLURM_JOB_ID % 1000 (two jobs sharing a node rarely collide).
//                               run_id = SLURM_JOB_ID, restart_count = SLURM_RESTART_COUNT.
//   PMI (Hydra, Intel MPI)      PMI_RANK, PMI_SIZE; MPI_LOCALRANKID/MPI_LOCALNRANKS when present, else
//                               one node. Store 127.0.0.1:29500; across nodes MASTER_ADDR is required.
//   none                        a world of one, store 127.0.0.1:29500.
// MASTER_ADDR and MASTER_PORT, when set, override the store address under every launcher. Only
// torchrun's agent serves a store: under the others agent_store is false and rank 0 hosts it.

#include <unistd.h>

#include <cstdint>
#include <optional>
#include <stdexcept>

#include "common/environment.hpp"
#include "common/integer.hpp"
#include "common/slurm_nodelist.hpp"
#include "ddprun/error.hpp"

namespace ddprun {
namespace {

using Env = common::Environment;

constexpr int kDefaultPort = 29500;  // torchrun's --master-port default
constexpr const char* kDefaultAddr = "127.0.0.1";

const std::string* find(const Env& env, std::string_view name) {
  auto it = env.find(std::string(name));
  return it == env.end() ? nullptr : &it->second;
}

/// The value of `name` as a non-negative int; Error naming it when malformed.
int parse_count(std::string_view name, const std::string& value) {
  auto number = common::parse_integer<std::int64_t>(value);
  if (!number || *number < 0 || *number > INT32_MAX) {
    throw Error(std::string(name) + "=" + value + " is not a non-negative integer");
  }
  return static_cast<int>(*number);
}

/// `name`'s value; Error naming it (and what needs it) when missing.
int require_count(const Env& env, std::string_view name, std::string_view needed_by) {
  const std::string* value = find(env, name);
  if (value == nullptr) {
    throw Error(std::string(name) + " is not set, but " + std::string(needed_by) + " is: the " +
                "launcher's environment is incomplete");
  }
  return parse_count(name, *value);
}

std::optional<int> optional_count(const Env& env, std::string_view name) {
  const std::string* value = find(env, name);
  if (value == nullptr) return std::nullopt;
  return parse_count(name, *value);
}

/// The first of `names` that is set, with its name; nothing when none is.
std::optional<std::pair<std::string_view, std::string>> first_of(const Env& env,
                                                                  std::initializer_list<std::string_view> names) {
  for (auto name : names) {
    if (const std::string* value = find(env, name)) return std::pair{name, *value};
  }
  return std::nullopt;
}

/// Ranks within their worlds; the names make the message point at the variables to fix.
void check_ranks(const Identity& id, std::string_view rank, std::string_view world, std::string_view local_rank,
                 std::string_view local_world) {
  auto fail = [](std::string text) { throw Error(std::move(text)); };
  if (id.world_size < 1) fail(std::string(world) + "=" + std::to_string(id.world_size) + " must be at least 1");
  if (id.rank >= id.world_size) {
    fail(std::string(rank) + "=" + std::to_string(id.rank) + " is out of range: expected 0 <= " + std::string(rank) +
         " < " + std::string(world) + "=" + std::to_string(id.world_size));
  }
  if (id.local_world_size < 1 || id.local_world_size > id.world_size) {
    fail(std::string(local_world) + "=" + std::to_string(id.local_world_size) + " is out of range: expected 1 <= " +
         std::string(local_world) + " <= " + std::string(world) + "=" + std::to_string(id.world_size));
  }
  if (id.local_rank >= id.local_world_size) {
    fail(std::string(local_rank) + "=" + std::to_string(id.local_rank) + " is out of range: expected 0 <= " +
         std::string(local_rank) + " < " + std::string(local_world) + "=" + std::to_string(id.local_world_size));
  }
}

/// MASTER_ADDR and MASTER_PORT override whatever the launcher implies.
void apply_master_override(const Env& env, Identity& id) {
  if (const std::string* addr = find(env, "MASTER_ADDR")) {
    if (addr->empty()) throw Error("MASTER_ADDR is set but empty: give the host of rank 0's store");
    id.master_addr = *addr;
  }
  if (const std::string* port = find(env, "MASTER_PORT")) {
    auto number = common::parse_integer<std::int64_t>(*port);
    if (!number || *number < 1 || *number > 65535) {
      throw Error("MASTER_PORT=" + *port + " is not a port number (1..65535)");
    }
    id.master_port = static_cast<int>(*number);
  }
}

/// torchrun, ddprun, or a hand-made env:// setup (RANK and WORLD_SIZE without TORCHELASTIC_RUN_ID).
Identity from_torchrun(const Env& env) {
  Identity id;
  id.launcher = Launcher::torchrun;
  const bool elastic = find(env, "TORCHELASTIC_RUN_ID") != nullptr;
  const std::string_view by = elastic ? "TORCHELASTIC_RUN_ID" : (find(env, "RANK") ? "RANK" : "WORLD_SIZE");
  id.rank = require_count(env, "RANK", by);
  id.world_size = require_count(env, "WORLD_SIZE", by);
  // torchrun always sets the local pair; a hand-made env:// setup may leave both out (one node).
  auto local_rank = optional_count(env, "LOCAL_RANK");
  auto local_world = optional_count(env, "LOCAL_WORLD_SIZE");
  if (elastic || local_rank || local_world) {
    id.local_rank = local_rank ? *local_rank : require_count(env, "LOCAL_RANK", local_world ? "LOCAL_WORLD_SIZE" : by);
    id.local_world_size =
        local_world ? *local_world : require_count(env, "LOCAL_WORLD_SIZE", local_rank ? "LOCAL_RANK" : by);
  } else {
    id.local_rank = id.rank;
    id.local_world_size = id.world_size;
  }
  check_ranks(id, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  if (elastic) {
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
      if (!find(env, name)) {
        throw Error(std::string(name) + " is not set, but TORCHELASTIC_RUN_ID is: the launcher's environment is incomplete");
      }
    }
    id.run_id = *find(env, "TORCHELASTIC_RUN_ID");
  }
  // PyTorch's own test is exactly this string comparison (== str(True)); anything else means False.
  const std::string* agent_store = find(env, "TORCHELASTIC_USE_AGENT_STORE");
  id.agent_store = agent_store != nullptr && *agent_store == "True";
  if (auto restarts = optional_count(env, "TORCHELASTIC_RESTART_COUNT")) id.restart_count = *restarts;
  return id;
}

Identity from_open_mpi(const Env& env) {
  Identity id;
  id.launcher = Launcher::open_mpi;
  const std::string_view by = find(env, "OMPI_COMM_WORLD_RANK") ? "OMPI_COMM_WORLD_RANK" : "OMPI_COMM_WORLD_SIZE";
  id.rank = require_count(env, "OMPI_COMM_WORLD_RANK", by);
  id.world_size = require_count(env, "OMPI_COMM_WORLD_SIZE", by);
  id.local_rank = require_count(env, "OMPI_COMM_WORLD_LOCAL_RANK", by);
  id.local_world_size = require_count(env, "OMPI_COMM_WORLD_LOCAL_SIZE", by);
  check_ranks(id, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
              "OMPI_COMM_WORLD_LOCAL_SIZE");
  // mpirun does not say where rank 0 runs: on one node it is here, across nodes the user must say.
  if (id.local_world_size < id.world_size && !find(env, "MASTER_ADDR")) {
    throw Error("MASTER_ADDR is not set: this Open MPI job spans several nodes (OMPI_COMM_WORLD_LOCAL_SIZE=" +
                std::to_string(id.local_world_size) + " < OMPI_COMM_WORLD_SIZE=" + std::to_string(id.world_size) +
                ") and mpirun does not tell where rank 0 runs; pass it, e.g. mpirun -x MASTER_ADDR=<host of rank 0>");
  }
  if (const std::string* job = find(env, "OMPI_MCA_ess_base_jobid")) id.run_id = *job;
  return id;
}

/// SLURM_TASKS_PER_NODE's form, "2(x3),1" (common/slurm_nodelist.hpp); Error naming the variable.
std::vector<int> expand_tasks_per_node(std::string_view name, std::string_view text) {
  try {
    return common::expand_slurm_counts(text);
  } catch (const std::invalid_argument& e) {
    throw Error(std::string(name) + "=" + std::string(text) + " is malformed: " + e.what());
  }
}

/// 29500 + SLURM_JOB_ID mod 1000: ranks of one job agree, two jobs sharing a node rarely collide.
int slurm_default_port(const Env& env) {
  const std::string* job = find(env, "SLURM_JOB_ID");
  auto number = job ? common::parse_integer<std::int64_t>(*job) : std::nullopt;
  return number && *number >= 0 ? kDefaultPort + static_cast<int>(*number % 1000) : kDefaultPort;
}

Identity from_slurm(const Env& env) {
  Identity id;
  id.launcher = Launcher::slurm;
  id.rank = require_count(env, "SLURM_PROCID", "SLURM_PROCID");
  // The step's own variables describe the tasks of this srun; the job's ones are the fallback.
  auto world = first_of(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
  if (!world) throw Error("SLURM_NTASKS is not set, but SLURM_PROCID is: start the workers with srun");
  std::string_view world_name = world->first;
  id.world_size = parse_count(world_name, world->second);
  id.local_rank = require_count(env, "SLURM_LOCALID", "SLURM_PROCID");
  const int node = require_count(env, "SLURM_NODEID", "SLURM_PROCID");

  auto per_node = first_of(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"});
  if (!per_node) throw Error("SLURM_TASKS_PER_NODE is not set, but SLURM_PROCID is: start the workers with srun");
  std::string_view per_node_name = per_node->first;
  if (per_node_name == "SLURM_NTASKS_PER_NODE") {
    id.local_world_size = parse_count(per_node_name, per_node->second);
  } else {
    std::vector<int> counts = expand_tasks_per_node(per_node_name, per_node->second);
    if (static_cast<std::size_t>(node) >= counts.size()) {
      throw Error("SLURM_NODEID=" + std::to_string(node) + " is out of range: " + std::string(per_node_name) + "=" +
                  per_node->second + " lists " + std::to_string(counts.size()) + " node(s)");
    }
    std::int64_t total = 0;
    for (int count : counts) total += count;
    if (total != id.world_size) {
      throw Error(std::string(per_node_name) + "=" + per_node->second + " adds up to " + std::to_string(total) +
                  " tasks, but " + std::string(world_name) + "=" + std::to_string(id.world_size));
    }
    id.local_world_size = counts[static_cast<std::size_t>(node)];
  }
  check_ranks(id, "SLURM_PROCID", world_name, "SLURM_LOCALID", per_node_name);

  // Rank 0 runs on the first node of the step (srun's block distribution, Slurm's default).
  auto nodelist = first_of(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (nodelist) {
    std::vector<std::string> hosts;
    try {
      hosts = expand_slurm_nodelist(nodelist->second);
    } catch (const Error& e) {
      throw Error(std::string(nodelist->first) + ": " + e.what());
    }
    if (hosts.empty()) throw Error(std::string(nodelist->first) + " is empty");
    id.master_addr = hosts.front();
  } else if (!find(env, "MASTER_ADDR")) {
    throw Error("SLURM_JOB_NODELIST is not set, but SLURM_PROCID is: cannot tell where rank 0 runs; set MASTER_ADDR");
  }
  id.master_port = slurm_default_port(env);
  if (const std::string* job = find(env, "SLURM_JOB_ID")) id.run_id = *job;
  if (auto restarts = optional_count(env, "SLURM_RESTART_COUNT")) id.restart_count = *restarts;
  return id;
}

/// MPICH's Hydra, Intel MPI and other PMI launchers.
Identity from_pmi(const Env& env) {
  Identity id;
  id.launcher = Launcher::pmi;
  const std::string_view by = find(env, "PMI_RANK") ? "PMI_RANK" : "PMI_SIZE";
  id.rank = require_count(env, "PMI_RANK", by);
  id.world_size = require_count(env, "PMI_SIZE", by);
  // Hydra exports MPI_LOCALRANKID/MPI_LOCALNRANKS; without them, assume one node.
  auto local_rank = optional_count(env, "MPI_LOCALRANKID");
  auto local_world = optional_count(env, "MPI_LOCALNRANKS");
  if (local_rank || local_world) {
    id.local_rank = local_rank ? *local_rank : require_count(env, "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
    id.local_world_size = local_world ? *local_world : require_count(env, "MPI_LOCALNRANKS", "MPI_LOCALRANKID");
  } else {
    id.local_rank = id.rank;
    id.local_world_size = id.world_size;
  }
  check_ranks(id, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
  if (id.local_world_size < id.world_size && !find(env, "MASTER_ADDR")) {
    throw Error("MASTER_ADDR is not set: this PMI job spans several nodes (MPI_LOCALNRANKS=" +
                std::to_string(id.local_world_size) + " < PMI_SIZE=" + std::to_string(id.world_size) +
                ") and the launcher does not tell where rank 0 runs; export MASTER_ADDR=<host of rank 0>");
  }
  return id;
}

}  // namespace

std::string_view launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::torchrun: return "torchrun";
    case Launcher::open_mpi: return "Open MPI";
    case Launcher::slurm: return "Slurm";
    case Launcher::pmi: return "PMI";
    case Launcher::none: return "none";
  }
  return "none";
}

std::vector<std::string> expand_slurm_nodelist(std::string_view nodelist) {
  try {
    return common::expand_slurm_nodelist(nodelist);
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
}

Identity identity_from(const Env& env) {
  Identity id;
  if (find(env, "RANK") || find(env, "WORLD_SIZE") || find(env, "TORCHELASTIC_RUN_ID")) {
    id = from_torchrun(env);
  } else if (find(env, "OMPI_COMM_WORLD_RANK") || find(env, "OMPI_COMM_WORLD_SIZE")) {
    id = from_open_mpi(env);
  } else if (find(env, "SLURM_PROCID")) {
    id = from_slurm(env);
  } else if (find(env, "PMI_RANK") || find(env, "PMI_SIZE")) {
    id = from_pmi(env);
  }
  // Only torchrun's agent serves a store; under every other launcher rank 0 hosts it.
  if (id.launcher != Launcher::torchrun) id.agent_store = false;
  apply_master_override(env, id);
  return id;
}

Identity identity_from_environment() { return identity_from(common::environment_snapshot()); }

}  // namespace ddprun

#pragma once
/// ddprun inside a Slurm allocation: what Slurm's variables say about this node of the job, and
/// the options they stand in for, so that `srun --ntasks-per-node=1 ddprun --nproc-per-node=4
/// train.py` needs no other flag. Pure functions of the environment and of the options given;
/// cli.cpp asks them before it reads any option (explicit values, command line or PET_*, win).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/cli_options.hpp"
#include "launcher/base/environ.hpp"

namespace ddprun::launcher {

/// What Slurm says about the ddprun whose environment it is. Each `*_from` is the variable a value
/// came from, as `NAME=VALUE`, for messages.
struct SlurmStep {
  std::string job_id;  ///< SLURM_JOB_ID (SLURM_JOBID)
  /// Started by srun (SLURM_STEP_ID is set). False in a batch script or an salloc shell: those run
  /// once, on the allocation's first node, and say nothing of a node rank.
  bool in_step = false;
  /// The nodes of the step (in_step: SLURM_STEP_NUM_NODES, else SLURM_NNODES), or of the
  /// allocation (SLURM_JOB_NUM_NODES, SLURM_NNODES) outside a step. A step may use fewer nodes
  /// than its allocation: `srun -N1 -w node2` in a 2-node allocation has 1.
  int nodes = 1;
  std::string nodes_from;
  int node_id = 0;  ///< SLURM_NODEID: this node's index in the step, 0..nodes-1 (0 outside a step)
  /// The step's hosts in order (SLURM_STEP_NODELIST; the job's list only where it has exactly
  /// `nodes` hosts, for it names the allocation's nodes, not the step's); empty when none is set.
  std::vector<std::string> hosts;
  std::string hosts_from;
  int tasks_here = 1;  ///< tasks of the step on this node (SLURM_STEP_TASKS_PER_NODE at node_id)
  std::string tasks_from;
  /// The GPUs Slurm gave the step on this node (SLURM_STEP_GPUS, else SLURM_JOB_GPUS), as Slurm
  /// numbers them; empty when it gave none. Slurm also sets CUDA_VISIBLE_DEVICES to them, which is
  /// what the workers inherit and `--nproc-per-node gpu` counts.
  std::vector<std::string> gpus;
  std::string gpus_from;
};

/// Nothing outside an allocation (SLURM_JOB_ID and SLURM_JOBID unset). Throws UsageError, led by
/// the variable, when one that is needed is malformed or they disagree (SLURM_NODEID not below the
/// node count, a node list of another length than the step's node count).
std::optional<SlurmStep> read_slurm_step(const Environ& env);

/// An option's value as the user gave it (the command line, or its PET_* variable), and how a
/// message names it ("--nnodes", "--nnodes (from PET_NNODES)").
struct GivenValue {
  std::string value;
  std::string label;
};
/// What the user gave for `option`; nothing when they left it out.
using GivenLookup = std::function<std::optional<GivenValue>(Option)>;

/// A value Slurm gives an option the user left out; `label` names both, for messages:
/// "--nnodes (from SLURM_STEP_NUM_NODES=2)".
struct SlurmDefault {
  Option option;
  std::string value;
  std::string label;
};

/// The options Slurm's values stand in for, each only where the user left it out:
///   --nnodes          the step's node count          --node-rank    SLURM_NODEID (static only)
///   --master-addr     the step's first host (static, several nodes; one node keeps 127.0.0.1)
///   --master-port     29500 + SLURM_JOB_ID % 1000 (as the runtime's own Slurm reading): two jobs
///                     sharing a node rarely collide
///   --rdzv-id         SLURM_JOB_ID                    --nproc-per-node  the step's GPUs, when any
/// Explicit values win; the facts of the step (--nnodes, --node-rank) may not be contradicted:
/// a --nnodes range without the step's node count, or another --node-rank, is a UsageError naming
/// both. --standalone (one node on its own) and --hostfile / -H (agents started over ssh, each
/// told its place by flags) leave Slurm out altogether. Also a UsageError, saying
/// what to run instead: several tasks of the step on this node (each would be a ddprun starting
/// workers of its own), and ddprun outside srun in an allocation of several nodes (a batch script
/// or an salloc shell: the other nodes would never join) unless --nnodes is given.
std::vector<SlurmDefault> slurm_defaults(const SlurmStep& step, const GivenLookup& given);

}  // namespace ddprun::launcher

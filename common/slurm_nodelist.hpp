#pragma once
/// Slurm's two compressed list forms, in the one place both the worker runtime (identity.cpp: a
/// worker started by srun) and the launcher (slurm_env.cpp: ddprun started by srun) read them.
/// Pure functions of text; they throw std::invalid_argument (each caller names the variable the
/// text came from) and never allocate without bound.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::common {

/// The most hosts (or counts) one list may expand to: a typo such as node[1-999999999] must not
/// allocate without bound. Well above any real cluster.
inline constexpr std::size_t kMaxSlurmListSize = 1'000'000;

/// Slurm's host lists (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST): "node[01-03,07],gpu5" ->
/// node01 node02 node03 node07 gpu5, in order. Several bracket groups in one name are a product
/// ("r[1-2]-n[1,3]" -> r1-n1 r1-n3 r2-n1 r2-n3); the zero padding of a range's lower bound is kept
/// (node[098-101] -> node098 .. node101). Throws std::invalid_argument saying what is wrong and
/// quoting the list, e.g. `unbalanced '[' in Slurm node list "n[1-2"`; an empty list is malformed.
std::vector<std::string> expand_slurm_nodelist(std::string_view nodelist);

/// Slurm's per-node counts (SLURM_TASKS_PER_NODE, SLURM_STEP_TASKS_PER_NODE,
/// SLURM_JOB_CPUS_PER_NODE): "2(x3),1" -> 2 2 2 1, one entry per node. Throws
/// std::invalid_argument (message: `expected e.g. "2(x3),1"`) on anything else, a negative count
/// or a count above INT32_MAX.
std::vector<int> expand_slurm_counts(std::string_view text);

}  // namespace ddprun::common

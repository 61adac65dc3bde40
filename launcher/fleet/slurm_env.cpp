#include "launcher/fleet/slurm_env.hpp"

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "common/integer.hpp"
#include "common/slurm_nodelist.hpp"
#include "launcher/cli/cli_values.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/base/text.hpp"
#include "rendezvous/rdzv_backend.hpp"

namespace ddprun::launcher {
namespace {

/// torchrun's --master-port default, and the base of the Slurm one.
constexpr int kBasePort = 29500;

/// A variable that is set, as `name` and `value`.
struct Found {
  std::string name;
  std::string value;
  std::string text() const { return name + "=" + value; }
};

/// The first of `names` that is set (an empty value counts as unset: Slurm never exports one).
std::optional<Found> first_of(const Environ& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto value = lookup(env, name); value && !value->empty()) return Found{name, *value};
  }
  return std::nullopt;
}

[[noreturn]] void fail(const Found& found, const std::string& why) {
  throw UsageError(found.text() + ": " + why);
}

int count_of(const Found& found, int low) {
  auto number = common::parse_integer<std::int64_t>(found.value);
  if (!number || *number < low || *number > kIntMax) {
    fail(found, "is not an integer >= " + std::to_string(low) + " (Slurm's environment is malformed)");
  }
  return static_cast<int>(*number);
}

/// "0,1" -> {"0", "1"}; blank entries dropped.
std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> items;
  while (!text.empty()) {
    auto comma = text.find(',');
    auto item = trim(text.substr(0, comma));
    if (!item.empty()) items.emplace_back(item);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  return items;
}

/// The step's hosts: SLURM_STEP_NODELIST; the job's list only when it is as long as the step.
void read_hosts(const Environ& env, SlurmStep& step) {
  auto step_list = step.in_step ? first_of(env, {"SLURM_STEP_NODELIST"}) : std::nullopt;
  auto list = step_list ? step_list : first_of(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!list) return;
  std::vector<std::string> hosts;
  try {
    hosts = common::expand_slurm_nodelist(list->value);
  } catch (const std::invalid_argument& e) {
    fail(*list, e.what());
  }
  if (static_cast<int>(hosts.size()) != step.nodes) {
    // A step on some nodes of its allocation (srun -N1 -w node2) keeps the job's list: which of
    // its hosts are the step's is unknown.
    if (!step_list) return;
    fail(*list, "names " + std::to_string(hosts.size()) + " host(s), but " + step.nodes_from);
  }
  step.hosts = std::move(hosts);
  step.hosts_from = list->text();
}

void read_tasks_here(const Environ& env, SlurmStep& step) {
  auto per_node = first_of(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  if (!per_node) return;
  std::vector<int> counts;
  try {
    counts = common::expand_slurm_counts(per_node->value);
  } catch (const std::invalid_argument& e) {
    fail(*per_node, std::string("is malformed: ") + e.what());
  }
  if (static_cast<std::size_t>(step.node_id) >= counts.size()) {
    fail(*per_node, "lists " + std::to_string(counts.size()) + " node(s), but SLURM_NODEID=" +
                        std::to_string(step.node_id));
  }
  step.tasks_here = counts[static_cast<std::size_t>(step.node_id)];
  step.tasks_from = per_node->text();
}

/// `raw` = a given value; true when it is a boolean that says yes.
bool says_yes(const std::optional<GivenValue>& raw) { return raw && parse_boolean(raw->value, raw->label); }

std::string nodes_word(int nodes) { return std::to_string(nodes) + (nodes == 1 ? " node" : " nodes"); }

/// Refuses --nnodes and --node-rank values that contradict the step. Values that are malformed are
/// left to the ordinary checks of the command line, which name them better.
void check_facts(const SlurmStep& step, const GivenLookup& given) {
  if (auto raw = given(Option::nnodes)) {
    std::optional<std::pair<int, int>> range;
    try {
      range = parse_nnodes(raw->value, raw->label);
    } catch (const UsageError&) {
    }
    if (range && (step.nodes < range->first || step.nodes > range->second)) {
      reject_value(raw->value, raw->label,
                   "contradicts Slurm: this srun step runs on " + nodes_word(step.nodes) + " (" +
                       step.nodes_from + "); leave --nnodes out, or give srun -N to match");
    }
  }
  if (auto raw = given(Option::node_rank)) {
    auto rank = to_integer(trim(raw->value));
    if (rank && *rank != step.node_id) {
      reject_value(raw->value, raw->label,
                   "contradicts Slurm, which runs this ddprun as node " + std::to_string(step.node_id) +
                       " of the step (SLURM_NODEID=" + std::to_string(step.node_id) + "); leave --node-rank out");
    }
  }
}

}  // namespace

std::optional<SlurmStep> read_slurm_step(const Environ& env) {
  auto job = first_of(env, {"SLURM_JOB_ID", "SLURM_JOBID"});
  if (!job) return std::nullopt;
  SlurmStep step;
  step.job_id = job->value;
  step.in_step = first_of(env, {"SLURM_STEP_ID", "SLURM_STEPID"}).has_value();
  auto nodes = step.in_step ? first_of(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES"})
                            : first_of(env, {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"});
  if (nodes) {
    step.nodes = count_of(*nodes, 1);
    step.nodes_from = nodes->text();
  } else {
    step.nodes_from = "no SLURM_NNODES";
  }
  if (step.in_step) {
    auto node = first_of(env, {"SLURM_NODEID"});
    if (!node) throw UsageError("SLURM_NODEID is not set, but SLURM_STEP_ID is: Slurm's environment is incomplete");
    step.node_id = count_of(*node, 0);
    if (step.node_id >= step.nodes) fail(*node, "is not below " + step.nodes_from);
    read_tasks_here(env, step);
  }
  read_hosts(env, step);
  auto gpus = step.in_step ? first_of(env, {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) : first_of(env, {"SLURM_JOB_GPUS"});
  if (gpus) {
    step.gpus = split_list(gpus->value);
    step.gpus_from = gpus->text();
  }
  return step;
}

std::vector<SlurmDefault> slurm_defaults(const SlurmStep& step, const GivenLookup& given) {
  // --standalone: one node on its own. --hostfile / -H: this ddprun only launches the job's agents
  // over ssh, each told its place by flags; whether the hosts are Slurm's is the user's business.
  if (says_yes(given(Option::standalone)) || given(Option::hostfile) || given(Option::hosts)) return {};
  std::vector<SlurmDefault> defaults;
  auto fill = [&](Option option, std::string value, const std::string& from) {
    if (given(option)) return;
    defaults.push_back({option, std::move(value), dash_name(spec_of(option)) + " (from " + from + ")"});
  };
  if (!step.in_step) {
    // A batch script or an salloc shell: one process on the first node of the allocation.
    if (step.nodes > 1 && !given(Option::nnodes)) {
      throw UsageError(step.nodes_from + ": ddprun was started outside srun in a Slurm allocation of " +
                       nodes_word(step.nodes) + " (a batch script or an salloc shell runs on the first node only), "
                       "so the other nodes would never join; start one ddprun on every node with "
                       "`srun --ntasks-per-node=1 ddprun ...`, or pass --nnodes 1 to use this node alone");
    }
  } else {
    if (step.tasks_here > 1) {
      throw UsageError(step.tasks_from + ": srun started " + std::to_string(step.tasks_here) +
                       " tasks on this node, each a ddprun that would start workers of its own; ddprun starts "
                       "the node's workers itself: run one per node, `srun --ntasks-per-node=1 ddprun "
                       "--nproc-per-node=" + std::to_string(step.tasks_here) + " ...`");
    }
    check_facts(step, given);
    fill(Option::nnodes, std::to_string(step.nodes), step.nodes_from);
    auto backend = given(Option::rdzv_backend);
    const bool is_static = !backend || rendezvous::backend_named(backend->value) == rendezvous::RdzvBackend::static_;
    if (is_static) {
      fill(Option::node_rank, std::to_string(step.node_id), "SLURM_NODEID=" + std::to_string(step.node_id));
      // One node keeps the loopback default: nothing needs to resolve the host's name.
      if (step.nodes > 1 && !given(Option::master_addr)) {
        if (step.hosts.empty()) {
          throw UsageError("SLURM_STEP_NODELIST is not set: ddprun cannot tell which host is node 0 of this " +
                           nodes_word(step.nodes) + " step; pass --master-addr");
        }
        fill(Option::master_addr, step.hosts.front(), step.hosts_from);
      }
    }
  }
  if (auto job = common::parse_integer<std::int64_t>(step.job_id); job && *job >= 0) {
    fill(Option::master_port, std::to_string(kBasePort + *job % 1000), "SLURM_JOB_ID=" + step.job_id);
  }
  fill(Option::rdzv_id, step.job_id, "SLURM_JOB_ID=" + step.job_id);
  if (!step.gpus.empty()) fill(Option::nproc_per_node, std::to_string(step.gpus.size()), step.gpus_from);
  return defaults;
}

}  // namespace ddprun::launcher

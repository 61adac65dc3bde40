#include "rendezvous/join_progress.hpp"

namespace ddprun::rendezvous {
namespace {

std::string seconds_of(const JoinProgress& p) {
  using std::chrono::duration_cast;
  using std::chrono::seconds;
  return std::to_string(duration_cast<seconds>(p.elapsed).count()) + " s of " +
         std::to_string(duration_cast<seconds>(p.timeout).count());
}

std::string nodes(int count) { return std::to_string(count) + (count == 1 ? " more node" : " more nodes"); }

}  // namespace

std::string describe_join_progress(const JoinProgress& p) {
  if (p.stage == JoinProgress::Stage::connecting) {
    return "waiting for the rendezvous store at " + p.store + " to answer" +
           (p.is_static ? " (node 0 hosts it)" : "") + ", " + seconds_of(p);
  }
  if (p.is_static) {
    std::string line = "waiting for " + nodes(p.max_nodes - p.joined) + ": " + std::to_string(p.joined) + " of " +
                       std::to_string(p.max_nodes) + " joined, " + seconds_of(p);
    if (!p.missing_ranks.empty()) {
      line += " (missing node rank";
      line += p.missing_ranks.size() == 1 ? " " : "s ";
      for (std::size_t i = 0; i < p.missing_ranks.size(); ++i) {
        if (i > 0) line += ", ";
        line += std::to_string(p.missing_ranks[i]);
      }
      line += ")";
    }
    return line;
  }
  const std::string range =
      p.min_nodes == p.max_nodes ? std::string() : " (--nnodes=" + std::to_string(p.min_nodes) + ":" + std::to_string(p.max_nodes) + ")";
  if (p.joined < p.min_nodes) {
    return "waiting for " + nodes(p.min_nodes - p.joined) + ": " + std::to_string(p.joined) + " of " +
           std::to_string(p.min_nodes) + " joined" + range + ", " + seconds_of(p);
  }
  return "last call, room for " + nodes(p.max_nodes - p.joined) + ": " + std::to_string(p.joined) + " of " +
         std::to_string(p.max_nodes) + " joined" + range + ", " + seconds_of(p);
}

std::string describe_round_result(int round, int nodes, int group_rank, int world_size, const std::string& master) {
  return "rendezvous round " + std::to_string(round) + ": " + std::to_string(nodes) + (nodes == 1 ? " node" : " nodes") +
         ", this node is rank " + std::to_string(group_rank) + ", world size " + std::to_string(world_size) +
         ", master " + master;
}

}  // namespace ddprun::rendezvous

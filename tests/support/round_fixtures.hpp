#pragma once
/// What the round-protocol and membership tests build again and again, whichever store they run
/// on (InProcessStore or a StoreServer on loopback): a node, the settings of a c10d or a static
/// job, the ids of a decision, and the job-shape conflicts with the message every node reads.
#include <chrono>
#include <string>
#include <vector>

#include "rendezvous/rendezvous_settings.hpp"
#include "rendezvous/round_record.hpp"

namespace ddprun::testing {

/// Node `id` on "host-<id>" at 127.0.0.1 (messages name it "host-<id> (127.0.0.1)").
inline rendezvous::NodeInfo node(const std::string& id, int nproc = 1, int static_rank = -1) {
  rendezvous::NodeInfo info;
  info.id = id;
  info.host_name = "host-" + id;
  info.addr = "127.0.0.1";
  info.nproc = nproc;
  info.static_rank = static_rank;
  return info;
}

/// How long a node of these jobs waits for its round, and the last call of a c10d round.
inline constexpr std::chrono::milliseconds kJoinTimeout{std::chrono::seconds(20)};
inline constexpr std::chrono::milliseconds kLastCall{300};

/// A c10d job "job" of MIN..MAX nodes (--nnodes=MIN:MAX).
inline rendezvous::RendezvousSettings dynamic_job(int min, int max) {
  rendezvous::RendezvousSettings settings;
  settings.run_id = "job";
  settings.min_nodes = min;
  settings.max_nodes = max;
  settings.join_timeout = kJoinTimeout;
  settings.last_call_timeout = kLastCall;
  return settings;
}

/// A static job "job" of `nnodes` nodes, each with its own --node-rank.
inline rendezvous::RendezvousSettings static_job(int nnodes) {
  rendezvous::RendezvousSettings settings = dynamic_job(nnodes, nnodes);
  settings.is_static = true;
  settings.timeout = kJoinTimeout;  // a static node's join deadline
  return settings;
}

/// The node ids of `decision`, in group-rank order.
inline std::vector<std::string> ids_of(const rendezvous::RoundDecision& decision) {
  std::vector<std::string> ids;
  for (const auto& n : decision.nodes) ids.push_back(n.id);
  return ids;
}

/// A static node "a" (rank 0) of a job of `first_nnodes` waits in the round when "b" (rank 1) says
/// `second_nnodes`: both read `expected`, whoever recorded the shape.
struct ShapeConflict {
  const char* what;
  int first_nnodes;
  int second_nnodes;
  std::string expected;
};

inline std::vector<ShapeConflict> static_shape_conflicts() {
  return {
      {"the disagreeing node second", 2, 3,
       "node rank 1 on host-b (127.0.0.1) says --nnodes=3, but this job was started with --nnodes=2 by node rank 0 "
       "on host-a (127.0.0.1): start every node of a job with the same --nnodes"},
      {"the disagreeing node first", 3, 2,
       "node rank 1 on host-b (127.0.0.1) says --nnodes=2, but this job was started with --nnodes=3 by node rank 0 "
       "on host-a (127.0.0.1): start every node of a job with the same --nnodes"},
  };
}

}  // namespace ddprun::testing

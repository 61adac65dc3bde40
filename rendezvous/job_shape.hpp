#pragma once
/// JobShape: what every node of a job must be started with alike (the rendezvous backend, --nnodes,
/// --max-restarts, --worker-store), and which node said so. The first node to record it in the store fixes the
/// job's shape (the hosting agent records its own before anyone can connect: in a static job,
/// node 0); a node that disagrees is told who started the job with what. Pure.
#include <string>
#include <string_view>

#include "rendezvous/rdzv_backend.hpp"
#include "rendezvous/rendezvous_settings.hpp"
#include "rendezvous/round_record.hpp"

namespace ddprun::rendezvous {

struct JobShape {
  /// static_ or c10d, the kind of rounds: etcd-v3 runs c10d's rounds and has always recorded itself
  /// as c10d (its nodes meet in etcd, where no static or c10d node looks).
  RdzvBackend backend = RdzvBackend::c10d;
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  bool agent_worker_store = false;  ///< --worker-store agent (static)
  /// Who recorded it, for messages only: never part of the agreement.
  std::string host_name;
  std::string addr;
  int static_rank = -1;  ///< static: the node's --node-rank
};

/// The shape `settings` describe, as node `by` sees it.
JobShape job_shape_of(const RendezvousSettings& settings, const NodeInfo& by);

std::string encode_job_shape(const JobShape& shape);
/// Throws RendezvousError("malformed job shape in the store: ...") on text ddprun did not write.
JobShape decode_job_shape(std::string_view text);

/// Empty when `mine` agrees with `stands` (the shape the job was started with). Otherwise one line
/// that names both nodes and the values they differ in, e.g. "node rank 1 on b (10.0.0.2) says
/// --nnodes=3, but this job was started with --nnodes=2 by node rank 0 on a (10.0.0.1): start every
/// node of a job with the same --nnodes".
std::string job_shape_mismatch(const JobShape& stands, const JobShape& mine);

}  // namespace ddprun::rendezvous

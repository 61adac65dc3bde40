#pragma once
/// Errors of the rendezvous: each message says what the user can do (who joined, who is missing,
/// which node finished the job, which run id the store belongs to).
#include "rendezvous/error.hpp"

namespace ddprun::rendezvous {

struct RendezvousError : Error {
  using Error::Error;
};

/// The job this node wants to join has already ended (finished or failed) on the other nodes.
struct RendezvousClosed : RendezvousError {
  using RendezvousError::RendezvousError;
};

}  // namespace ddprun::rendezvous

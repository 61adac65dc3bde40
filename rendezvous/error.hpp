#pragma once
/// The rendezvous layer's one error model: everything it throws at its callers derives from
/// rendezvous::Error (StoreError, StoreTimeout, RendezvousError, RendezvousClosed, RoundFailed,
/// a bad endpoint or setting), so that a caller above can catch the layer's failures in one place
/// and word them for its users. Messages never name a launcher flag: the caller adds that.
#include <stdexcept>

namespace ddprun::rendezvous {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ddprun::rendezvous

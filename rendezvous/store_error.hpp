#pragma once
/// Errors of the store, client and server side. Messages name the operation, the key and the
/// address, so that a user can tell which rank waited for what where.
#include "rendezvous/error.hpp"

namespace ddprun::rendezvous {

struct StoreError : Error {
  using Error::Error;
};

/// An operation did not complete within its timeout (the connection stays usable).
struct StoreTimeout : StoreError {
  using StoreError::StoreError;
};

}  // namespace ddprun::rendezvous

#pragma once
/// What one store connection may make the server hold, and the rule that keeps it there: a request
/// runs only once its whole reply fits in what the connection may still leave unsent. Pure code;
/// StoreConnection applies it before executing each request, so no reply is ever built that the
/// budget has not already admitted (one MULTI_GET naming an 8 MiB key 400 times is refused before
/// a byte of its 3.2 GB reply exists).
#include <cstddef>

#include "rendezvous/key_space.hpp"
#include "rendezvous/wire.hpp"

namespace ddprun::rendezvous {

/// A connection's input is read in steps of at most this many bytes.
inline constexpr std::size_t kReadStepBytes = 1 << 20;
/// Replies and pushes a client may leave unread before the server stops serving it.
inline constexpr std::size_t kUnsentBytes = 16 << 20;
/// The same, and the input it may have buffered, before it has authenticated: enough for the
/// handshake (every request allowed then is under 100 bytes, every reply under 50), nothing more.
inline constexpr std::size_t kUnauthenticatedBytes = 4 << 10;

/// Bounds on one connection's buffers, and what its decoder accepts.
struct ConnectionBudget {
  std::size_t max_unsent_bytes = 0;  ///< replies and pushes not yet taken by the socket
  std::size_t max_input_bytes = 0;   ///< bytes read but not yet executed
  wire::Limits limits;
};

/// An authenticated connection's budget (or any connection's, when the store has no token):
/// kUnsentBytes of output, raised to the largest single reply or push `limits` allow, so that a
/// GET of the largest value always fits; input of one whole request plus one read step.
ConnectionBudget open_budget(const wire::Limits& limits);

/// Before authentication: kUnauthenticatedBytes each way, and a decoder that refuses any request
/// larger than the handshake needs (`limits` still apply where they are tighter).
ConnectionBudget unauthenticated_budget(const wire::Limits& limits);

/// The largest single thing `limits` let the server owe one client: a WATCH_KEY push of a key
/// with a largest old and new value (a GET reply of the largest value is smaller).
std::size_t largest_single_reply_bytes(const wire::Limits& limits);

/// Bytes of the reply the server would write for `request` if it ran now, whoever answers it (the
/// connection's handshake or the key space). Pushes owed to other sessions are not counted: each
/// receiver checks those against its own budget.
std::size_t reply_bytes(const KeySpace& keys, const wire::Request& request);

enum class Admission {
  run,   ///< the reply fits beside what is unsent: execute the request now
  wait,  ///< it will fit once the unsent bytes drain: stop reading and try again after a write
  never  ///< it is larger than the whole budget: close the connection
};

/// Whether a request whose reply is `reply` bytes may run while `unsent` bytes wait.
Admission admit(std::size_t unsent, std::size_t reply, std::size_t max_unsent);

}  // namespace ddprun::rendezvous

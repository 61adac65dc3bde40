#include "rendezvous/connection_budget.hpp"

#include <algorithm>
#include <cstdint>

#include "rendezvous/auth.hpp"

namespace ddprun::rendezvous {
namespace {

/// a + b, or SIZE_MAX when that overflows: a size past every budget is as good as infinite.
std::size_t saturating_add(std::size_t a, std::size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }

constexpr std::size_t kLengthBytes = 8;  ///< the u64 before every bytes field

}  // namespace

std::size_t largest_single_reply_bytes(const wire::Limits& limits) {
  // u8 type, then key, old value and new value as bytes fields.
  std::size_t push = 1 + 3 * kLengthBytes;
  push = saturating_add(push, limits.max_key_bytes);
  push = saturating_add(push, limits.max_value_bytes);
  return saturating_add(push, limits.max_value_bytes);
}

ConnectionBudget open_budget(const wire::Limits& limits) {
  return ConnectionBudget{
      .max_unsent_bytes = std::max(kUnsentBytes, largest_single_reply_bytes(limits)),
      .max_input_bytes = saturating_add(limits.max_request_bytes, kReadStepBytes),
      .limits = limits,
  };
}

ConnectionBudget unauthenticated_budget(const wire::Limits& limits) {
  // AUTH_RESPONSE, the largest request allowed then, is 81 bytes: a code and two 32-byte fields
  // (held to max_key_bytes by the decoder).
  wire::Limits handshake{
      .max_key_bytes = std::min<std::size_t>(limits.max_key_bytes, 64),
      .max_value_bytes = std::min<std::size_t>(limits.max_value_bytes, 64),
      .max_keys_per_request = std::min<std::size_t>(limits.max_keys_per_request, 1),
      .max_request_bytes = std::min<std::size_t>(limits.max_request_bytes, 256),
  };
  return ConnectionBudget{
      .max_unsent_bytes = kUnauthenticatedBytes,
      .max_input_bytes = kUnauthenticatedBytes,
      .limits = handshake,
  };
}

std::size_t reply_bytes(const KeySpace& keys, const wire::Request& request) {
  switch (request.op) {
    case wire::Op::validate:
      return 0;
    case wire::Op::auth_challenge:
      return kLengthBytes + auth::kNonceBytes;
    case wire::Op::auth_response:
      return 1 + kLengthBytes + auth::kProofBytes;
    default:
      return keys.reply_bytes(request);
  }
}

Admission admit(std::size_t unsent, std::size_t reply, std::size_t max_unsent) {
  if (reply > max_unsent) return Admission::never;
  if (unsent > max_unsent - reply) return Admission::wait;
  return Admission::run;
}

}  // namespace ddprun::rendezvous

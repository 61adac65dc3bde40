#pragma once
/// The round-closing rule of RoundProtocol (round_protocol.hpp), apart from the store: given what a
/// node in a forming round sees when it looks, whether it closes the round now, waits (for what,
/// until when) or gives up. Pure; the protocol does the I/O around it.
///
/// The rule:
///  - fewer than MIN nodes in: wait for the MIN-th join, until the join deadline;
///  - the round is due at once when it is full (MAX nodes), or when every node expected back after
///    a membership change is in; else when the last call is over (last_call_timeout counted from
///    when this node first saw MIN nodes in);
///  - one node closes a due round: the one whose join filled it (slot MAX-1), or every node that
///    found all expected nodes back, or, at the end of the last call, the one whose join made MIN
///    (slot MIN-1: it saw the last call first). The others wait for its decision and close
///    themselves only when it has not come within closer_grace (only a dead closer makes them
///    wait): a round of N nodes costs one decision, not N;
///  - a node that neither closes nor may wait any longer (the join deadline passed) times out.
#include <chrono>
#include <cstddef>
#include <optional>

#include "rendezvous/clock.hpp"

namespace ddprun::rendezvous {

/// How long the other nodes leave a due round to its designated closer before closing it themselves.
inline constexpr std::chrono::milliseconds kCloserGrace{2000};

/// What a node remembers between two looks at the same forming round.
struct CloseTimers {
  std::optional<SteadyTime> last_call_end;     ///< set when it first saw MIN nodes in
  std::optional<SteadyTime> closer_grace_end;  ///< set when it first found the round due, not being its closer
  bool operator==(const CloseTimers&) const = default;
};

/// One look at a forming round.
struct RoundLook {
  int count = 0;  ///< nodes in the round: join slots taken, at most MAX
  int min_nodes = 1;
  int max_nodes = 1;
  int slot = 0;  ///< this node's join slot
  /// After a membership change: every node expected back is in (see expected_back_possible; false
  /// when nobody is expected).
  bool expected_back = false;
  std::chrono::milliseconds last_call_timeout{0};
  std::chrono::milliseconds closer_grace = kCloserGrace;
  SteadyTime now;
  SteadyTime deadline;  ///< the join deadline
  CloseTimers timers;   ///< from the previous look (empty at the first)
};

struct CloseVerdict {
  enum class Next {
    time_out,           ///< the join deadline passed: give up
    wait_for_min,       ///< sleep until the MIN-th join, or `wake`
    wait_for_decision,  ///< sleep until the round's decision, or `wake`
  };
  /// Close the round now. When the close cannot be made (fewer than MIN join records: a node died
  /// between taking its slot and writing it), `next` says what to do instead.
  bool close = false;
  Next next = Next::time_out;
  SteadyTime wake;     ///< for the waits: until when (the join deadline at the latest)
  CloseTimers timers;  ///< to pass to the next look
  bool operator==(const CloseVerdict&) const = default;
};

/// Whether `expected_back` can be true, so that the caller reads the join records to find out:
/// the round is not full, some nodes are expected back, and as many nodes are in.
inline bool expected_back_possible(int count, int max_nodes, std::size_t expected) {
  return count < max_nodes && expected > 0 && static_cast<std::size_t>(count) >= expected;
}

CloseVerdict close_rule(const RoundLook& look);

}  // namespace ddprun::rendezvous

#pragma once
/// Deadlines of store calls, and how messages show a duration.
#include <chrono>
#include <string>

namespace ddprun::rendezvous {

/// A call's deadline, with the timeout it came from for messages.
struct Deadline {
  std::chrono::steady_clock::time_point at;
  std::chrono::milliseconds timeout;
};

/// The deadline `timeout` from now; a "forever" timeout (milliseconds::max()) does not overflow.
Deadline deadline_after(std::chrono::milliseconds timeout);

/// "30 s", "250 ms" or "1.5 s", as messages show a timeout.
std::string describe_duration(std::chrono::milliseconds duration);

}  // namespace ddprun::rendezvous

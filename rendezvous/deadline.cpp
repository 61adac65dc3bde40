#include "rendezvous/deadline.hpp"

#include <algorithm>
#include <cstdio>

using std::chrono::milliseconds;

namespace ddprun::rendezvous {

Deadline deadline_after(milliseconds timeout) {
  // A "forever" timeout (milliseconds::max()) must not overflow the clock: ten years is forever here.
  constexpr milliseconds kForever = std::chrono::hours(24 * 365 * 10);
  return {std::chrono::steady_clock::now() + std::clamp(timeout, milliseconds(0), kForever), timeout};
}

std::string describe_duration(milliseconds duration) {
  auto ms = duration.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  if (ms < 1000) return std::to_string(ms) + " ms";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

}  // namespace ddprun::rendezvous

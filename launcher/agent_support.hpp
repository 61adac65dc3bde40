#pragma once
/// Small helpers shared by the agent's single-node and multi-node halves.
#include <unistd.h>

#include <chrono>
#include <string>

#include "launcher/output/console_output.hpp"
#include "launcher/cli/launch_config.hpp"

namespace ddprun::launcher {

/// --shutdown-timeout as a duration.
inline std::chrono::milliseconds grace_of(const LaunchConfig& config) {
  return std::chrono::milliseconds(static_cast<long long>(config.shutdown_timeout_s * 1000.0));
}

}  // namespace ddprun::launcher

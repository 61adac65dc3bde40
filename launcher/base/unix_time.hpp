#pragma once
/// Now as unix time in seconds, as the status documents, stack files and the run registry carry it.
#include <chrono>

namespace ddprun::launcher {

inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace ddprun::launcher

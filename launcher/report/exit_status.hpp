#pragma once
/// The one place where a failure that ends ddprun becomes what the user sees: one line on stderr
/// and the exit status of the architecture page. Pure: tested by table.
#include <exception>
#include <string>

namespace ddprun::launcher {

struct ExitReport {
  std::string line;  ///< "ddprun: ...\n", for stderr
  int status;
};

/// UsageError: "ddprun: error: WHAT (see ddprun --help)", 2. LaunchError and the rendezvous
/// layer's errors (a store that cannot bind, a rendezvous that failed): "ddprun: WHAT", 1. The
/// system's refusals (a folder, a descriptor, memory) say what to check, 1. Anything else is
/// "ddprun: internal error: WHAT", 1.
ExitReport report_failure(std::exception_ptr failure);

}  // namespace ddprun::launcher

#pragma once
/// A store serves one connection per rank: thousands of descriptors, above the usual soft limit.

namespace ddprun::rendezvous {

/// Raises this process's soft RLIMIT_NOFILE to its hard limit; returns the soft limit in force.
long raise_open_file_limit();

}  // namespace ddprun::rendezvous

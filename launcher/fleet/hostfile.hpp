#pragma once
/// The hosts of a job launched over ssh: a hostfile (`host slots=N` lines, the MPI / DeepSpeed
/// format) or a host list (`-H h1:4,h2:4`, Horovod's), narrowed by --include / --exclude. Pure:
/// text in, hosts out; every mistake is a UsageError naming the file and line or the flag.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

/// One machine of the job, in the order given: that order is the node rank (node 0 = the first).
struct HostSlot {
  std::string destination;  ///< what ssh is given: `host` or `user@host`
  /// Workers on it; nothing = --nproc-per-node's count.
  std::optional<int> slots;
  bool operator==(const HostSlot&) const = default;
};

/// The part of a destination other machines connect to: `user@host` -> `host`, `[v6]` -> `v6`.
std::string host_address(std::string_view destination);

/// A hostfile's text. Each line: `HOST [slots=N] [max_slots=M]` (max_slots is accepted and ignored,
/// as DeepSpeed does); `#` starts a comment; blank lines are skipped. `name` (the file's path) leads
/// each message: "--hostfile hosts.txt:3: ...". Throws UsageError on a bad line, a host listed twice,
/// or no host at all.
std::vector<HostSlot> parse_hostfile(std::string_view text, std::string_view name);

/// `-H h1:4,h2,[::1]:2`: hosts with an optional `:SLOTS` (IPv6 in brackets). Same rules.
std::vector<HostSlot> parse_host_list(std::string_view text, std::string_view label);

/// Keeps the hosts named in `include` (comma separated; empty = all) and drops those in `exclude`.
/// A name matches a destination or its host_address. Throws UsageError when both are given, when a
/// name matches no host (a typo would otherwise run a smaller job), or when no host is left.
std::vector<HostSlot> select_hosts(std::vector<HostSlot> hosts, std::string_view include, std::string_view exclude);

}  // namespace ddprun::launcher

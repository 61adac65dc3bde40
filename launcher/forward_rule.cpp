#include "forward_rule.hpp"

namespace ddprun::launcher {

ForwardVerdict decide_forward(const SignalOrigin& origin, std::string_view sender_name,
                              bool workers_share_launcher_cgroup) {
  // A kernel-sent signal, a user's kill, a batch script's trap: only ddprun tells the workers.
  if (!sent_by_a_process(origin) || sender_name != "slurmstepd") return ForwardVerdict::forward;
  return workers_share_launcher_cgroup ? ForwardVerdict::sender_signals_workers_too : ForwardVerdict::forward;
}

}  // namespace ddprun::launcher

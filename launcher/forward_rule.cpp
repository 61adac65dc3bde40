#include "launcher/forward_rule.hpp"

namespace ddprun::launcher {

bool in_slurm_v1_step(std::string_view proc_cgroup) {
  // Lines are "ID:CONTROLLERS:PATH"; cgroup v2's is "0::PATH".
  while (!proc_cgroup.empty()) {
    auto end = proc_cgroup.find('\n');
    std::string_view line = proc_cgroup.substr(0, end);
    proc_cgroup = end == std::string_view::npos ? std::string_view{} : proc_cgroup.substr(end + 1);
    auto first = line.find(':');
    auto second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view controllers = line.substr(first + 1, second - first - 1);
    std::string_view path = line.substr(second + 1);
    if (path.find("/job_") == std::string_view::npos || path.find("/step_") == std::string_view::npos) continue;
    while (!controllers.empty()) {
      auto comma = controllers.find(',');
      if (controllers.substr(0, comma) == "freezer") return true;
      controllers = comma == std::string_view::npos ? std::string_view{} : controllers.substr(comma + 1);
    }
  }
  return false;
}

ForwardVerdict decide_forward(const SignalOrigin& origin, std::string_view sender_name,
                              bool workers_share_launcher_cgroup) {
  // A kernel-sent signal, a user's kill, a batch script's trap: only ddprun tells the workers.
  if (!sent_by_a_process(origin) || sender_name != "slurmstepd") return ForwardVerdict::forward;
  return workers_share_launcher_cgroup ? ForwardVerdict::sender_signals_workers_too : ForwardVerdict::forward;
}

}  // namespace ddprun::launcher

#include "rendezvous/round_close_rule.hpp"

#include <algorithm>

namespace ddprun::rendezvous {

CloseVerdict close_rule(const RoundLook& look) {
  CloseVerdict verdict;
  verdict.timers = look.timers;
  CloseTimers& timers = verdict.timers;
  if (look.count >= look.min_nodes) {
    const bool full = look.count >= look.max_nodes;
    const bool expected_back = !full && look.expected_back;
    if (!timers.last_call_end) timers.last_call_end = look.now + look.last_call_timeout;
    const bool last_call_over = look.now >= *timers.last_call_end;
    bool designated = full ? look.slot == look.max_nodes - 1 : expected_back;
    if (last_call_over && !full && !expected_back) designated = look.slot == look.min_nodes - 1;
    const bool due = full || expected_back || last_call_over;
    if (due && !designated && !timers.closer_grace_end) timers.closer_grace_end = look.now + look.closer_grace;
    verdict.close = due && (designated || look.now >= *timers.closer_grace_end);
  }
  if (look.now >= look.deadline) {
    verdict.next = CloseVerdict::Next::time_out;
    verdict.wake = look.deadline;
  } else if (look.count < look.min_nodes) {
    verdict.next = CloseVerdict::Next::wait_for_min;
    verdict.wake = look.deadline;
  } else {
    // Within the last call (or the closer's grace): the decision, or the end of that wait.
    verdict.next = CloseVerdict::Next::wait_for_decision;
    verdict.wake = std::min(timers.closer_grace_end ? *timers.closer_grace_end : *timers.last_call_end, look.deadline);
  }
  return verdict;
}

}  // namespace ddprun::rendezvous

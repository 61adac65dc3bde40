#pragma once
/// Child reaping for the agent: ddprun is a child subreaper, so processes its workers leave behind
/// are re-parented to it and can be found (as its children) and killed before it exits.
#include <sys/types.h>

#include <functional>

namespace ddprun::launcher {

/// Makes this process a child subreaper (PR_SET_CHILD_SUBREAPER). Returns false when the kernel
/// refuses, which only weakens the final sweep.
bool become_subreaper();

/// Reaps every child that has exited, without blocking, calling `on_exit(pid, wait_status)` for
/// each. Orphaned grandchildren are reaped the same way; the caller ignores pids it does not know.
void reap_exited_children(const std::function<void(pid_t, int)>& on_exit);

/// SIGKILLs and reaps every remaining child of this process (workers' leftovers re-parented to us)
/// but `spare` (the guardian, which must outlive us), repeating while new ones appear, for at most
/// `max_rounds` rounds. Returns how many were killed.
int kill_remaining_children(pid_t spare = 0, int max_rounds = 20);

}  // namespace ddprun::launcher

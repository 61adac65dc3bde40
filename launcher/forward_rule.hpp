#pragma once
/// Whether a signal ddprun forwards (--forward-signals, SIGUSR1 and SIGUSR2 by default) is passed
/// on to the workers, decided from who sent it.
///
/// Slurm signals a step (`scancel --signal=USR1`, `srun --signal=USR1@60`, `sbatch --signal=USR1@60`)
/// through slurmstepd, which sends the signal to every process its process tracking holds for the
/// step: with proctrack/cgroup, each pid in the step's task cgroups (read flat, not their children).
/// Workers in ddprun's own cgroup are among them and already have the signal: passing it on would
/// deliver it twice. Workers in the job cgroup ddprun made below its own (DDPRUN_JOB_CGROUP) are
/// not, and need it passed on.
#include <string_view>

#include "launcher/signal_origin.hpp"

namespace ddprun::launcher {

enum class ForwardVerdict {
  forward,                    ///< pass it on to every running worker
  sender_signals_workers_too  ///< Slurm's slurmstepd sent it, and it signals the workers as well
};

/// Whether /proc/PID/cgroup's text (`proc_cgroup`) puts the process in a Slurm step's cgroup v1
/// freezer cgroup (`.../job_<id>/step_<id>...`), where proctrack/cgroup tracks a step on cgroup v1
/// (or hybrid) machines. A worker inherits that membership whatever ddprun's job cgroup (cgroup v2)
/// does, so Slurm reaches it.
bool in_slurm_v1_step(std::string_view proc_cgroup);

/// `sender_name`: process_name(origin.sender) for a signal a process sent (empty when unknown).
/// `workers_share_launcher_cgroup`: the workers are where Slurm looks: ddprun's own cgroup (no job
/// cgroup), or a Slurm step's cgroup v1 freezer cgroup (in_slurm_v1_step).
ForwardVerdict decide_forward(const SignalOrigin& origin, std::string_view sender_name,
                              bool workers_share_launcher_cgroup);

}  // namespace ddprun::launcher

#pragma once
/// The supervisor's decisions, without I/O: `next(state, event)` updates the state and returns the
/// actions to take, in order. The Agent (agent.cpp, agent_rounds.cpp) is the shell around it: it
/// turns child exits, signals and rendezvous outcomes into events, and actions into processes,
/// store requests and console lines. One node and many go through the same function; a
/// single-node job never sees round events, and never gets round actions.
///
/// The life of one node: joining (multi-node) -> running -> stopping (after a failure here, for a
/// round that ended elsewhere, or for a signal) -> then a restart (running again), a new round
/// (joining), waiting for the other nodes (this node's workers succeeded), leaving (telling the
/// others this node goes) or finished. tests/unit/supervisor_test.cpp gives every event in every
/// phase, as a table.
///
/// A hang (--hang-timeout, found by the agent's hang rule) while running: every rank's stacks are
/// captured (CaptureStacks; StacksCaptured follows), then --hang-action says what happens: report
/// (nothing more), stop (the workers are stopped and the job fails with the hang in its summary,
/// whatever restarts are left) or restart (as a failure: a restart while --max-restarts allows).
#include <chrono>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "launcher/observe/hang_action.hpp"
#include "launcher/workers/worker_exit.hpp"
#include "rendezvous/round_record.hpp"

namespace ddprun::launcher {

enum class Phase {
  starting,                ///< before Started
  joining,                 ///< multi-node: waiting for a round to form
  running,                 ///< the workers run
  stopping_after_failure,  ///< a worker failed here, or the job cannot go on (start, rendezvous)
  stopping_for_round_end,  ///< multi-node: the round ended elsewhere; workers stop for the next
  stopping_for_signal,     ///< ddprun was asked to stop
  waiting_for_others,      ///< multi-node: this node's workers succeeded; the exit barrier
  leaving,                 ///< multi-node: telling the others this node goes (LeaveDone follows)
  finished,                ///< the exit status is decided; only the console's last lines go out
};

/// "stopping_for_signal", for tests and -v.
const char* phase_name(Phase phase);

struct SupervisorState {
  // Fixed for the job.
  bool multi_node = false;
  bool elastic = false;  ///< multi-node with --nnodes MIN:MAX, MIN < MAX: the job goes on without a node
  int max_restarts = 0;
  HangAction hang_action = HangAction::report;
  std::string node_id;           ///< multi-node: this node's id in the rounds
  std::string node_description;  ///< multi-node: "host (addr)", as messages name this node

  Phase phase = Phase::starting;
  int restart_count = 0;
  bool group_running = false;  ///< a worker group exists (from StartGroup until GroupDone)
  /// Failed workers reaped in the current batch of exits, with their global rank: all of them
  /// happened before ddprun could react, so all are recorded when the batch ends.
  std::vector<std::pair<WorkerExit, int>> reaped_failures;
  int failures = 0;  ///< failures recorded this attempt
  int first_failed_rank = -1;
  int first_failed_exitcode = 0;
  std::string start_error;       ///< the workers could not be started (this attempt)
  bool start_error_node_unfit = false;  ///< StartFailed::node_unfit of that error
  std::string rendezvous_error;  ///< the rendezvous failed: the job cannot go on here
  int stop_signal = 0;           ///< the signal that asked ddprun to stop (0: none)
  std::optional<int> round;      ///< multi-node: the round this node is in
  std::optional<rendezvous::RoundEnd> round_end;  ///< how that round ended, once known
  int leave_status = 0;          ///< leaving: the exit status once the others are told
  int exit_status = 0;           ///< finished: ddprun's exit status
  bool capturing = false;        ///< a hang's stacks are being captured (CaptureStacks until StacksCaptured)
  std::string hang_found;        ///< the hang being captured, as said ("no rank made progress for 31 s")
  std::string hang;              ///< the hang that ended this attempt (stop, restart): a failure of its own
  int hangs = 0;                 ///< hangs found so far (the status's count)
};

namespace event {
struct Started {};
/// One worker exited; `rank` is its global rank. Exits reaped together end with ReapBatchDone.
struct WorkerExited {
  WorkerExit exit;
  int rank = 0;
};
struct ReapBatchDone {};
/// A worker could not be started (spawn, log file, pty), or the GPU check refused the start: the
/// job cannot run here. `node_unfit`: this node cannot run workers (an unhealthy GPU) where another
/// could; an elastic job goes on without it (the node leaves the round) instead of failing.
struct StartFailed {
  std::string message;
  bool node_unfit = false;
};
/// SIGTERM, SIGINT, SIGHUP, SIGQUIT (--signals-to-handle).
struct StopSignal {
  int signo = 0;
};
/// Every worker of the group has exited and its output is carried to the end.
struct GroupDone {};
struct RoundFormed {
  rendezvous::RoundDecision decision;
};
struct RoundEnded {
  int round = 0;
  rendezvous::RoundEnd end;
};
/// `told_to_every_node`: the store holds the same error for the other nodes, who still read it.
struct RendezvousFailed {
  std::string message;
  bool told_to_every_node = false;
};
/// Leaving: the store took this node's end of the round, or close_timeout ran out.
struct LeaveDone {};
/// No rank made progress for --hang-timeout (the hang rule, once per hang).
struct HangDetected {
  double idle_seconds = 0;
  double timeout_seconds = 0;
};
/// The stacks CaptureStacks asked for are captured (and the digest printed, the files written).
struct StacksCaptured {};
}  // namespace event

using SupervisorEvent =
    std::variant<event::Started, event::WorkerExited, event::ReapBatchDone, event::StartFailed, event::StopSignal,
                 event::GroupDone, event::RoundFormed, event::RoundEnded, event::RendezvousFailed, event::LeaveDone,
                 event::HangDetected, event::StacksCaptured>;

namespace action {
/// A new worker group for this attempt (state.restart_count; in a round, the round's ranks).
struct StartGroup {};
/// Stop the group: `signo` to every worker, SIGKILL after the grace period. `hold`: starting no
/// more workers now, the signal goes out after that long (kSameMoment, failure_rule.hpp), unless a
/// stop without hold comes first or every worker has exited.
struct StopGroup {
  int signo = 0;
  std::chrono::milliseconds hold{0};
};
/// SIGKILL to every worker now, the group is done with.
struct KillGroup {};
/// SIGKILL to the workers still running (asked to stop twice).
struct KillRunning {};
/// Describe this worker's failure (error file, stderr tail, OOM) for the summary.
struct RecordFailure {
  WorkerExit exit;
  int rank = 0;
};
/// Multi-node: a worker here failed; end the round with `end`, unless a peer turns out to be gone.
struct ReportFailure {
  rendezvous::RoundEnd end;
};
/// Multi-node: this node's workers all succeeded (the exit barrier).
struct MarkFinished {};
/// Multi-node: join the next round.
struct JoinRound {};
/// Multi-node: this node is in the round `decision` formed (its ranks, its worker store).
struct EnterRound {
  rendezvous::RoundDecision decision;
};
/// Multi-node: the round ended and a new one follows: let its worker store and keys go.
struct CloseRound {};
/// Multi-node: end the round with `end` (told to the others); LeaveDone follows.
struct Leave {
  rendezvous::RoundEnd end;
};
/// The job ended for every node: keep serving the store until the others have read that.
struct LingerStore {};
/// One line of ddprun's own.
struct Print {
  std::string text;
};
/// The failure summary of this attempt's recorded failures.
struct PrintFailureSummary {};
/// ddprun exits with `exit_status` once the console took its last lines; `impatient` (ended by a
/// signal): a console that takes nothing gets a moment only.
struct Finish {
  int exit_status = 0;
  bool impatient = false;
};
/// A signal while finishing: nobody reads the console; stop now.
struct StopLoop {};
/// Capture every rank's stacks, print the digest, write the files; StacksCaptured follows.
struct CaptureStacks {};
}  // namespace action

using SupervisorAction =
    std::variant<action::StartGroup, action::StopGroup, action::KillGroup, action::KillRunning, action::RecordFailure,
                 action::ReportFailure, action::MarkFinished, action::JoinRound, action::EnterRound, action::CloseRound,
                 action::Leave, action::LingerStore, action::Print, action::PrintFailureSummary, action::Finish,
                 action::StopLoop, action::CaptureStacks>;

/// Applies `event` to `state`; returns what to do, in order.
std::vector<SupervisorAction> next(SupervisorState& state, const SupervisorEvent& event);

/// "stop(SIGTERM)", "print(rank 1 failed ...)", "finish(1)": an action as tests and -v show it.
std::string describe_action(const SupervisorAction& action);


}  // namespace ddprun::launcher

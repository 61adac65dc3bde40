#include "launcher/supervisor.hpp"

#include <signal.h>

#include <cstdio>
#include <utility>

#include "launcher/base/errors.hpp"
#include "launcher/report/failure_rule.hpp"
#include "launcher/base/signal_names.hpp"

namespace ddprun::launcher {
namespace {

using Actions = std::vector<SupervisorAction>;
using rendezvous::EndKind;
using rendezvous::RoundEnd;

/// A round's end as this node tells its user about it, when the job goes on.
std::string describe_end_here(const RoundEnd& end) {
  switch (end.kind) {
    case EndKind::failure: return end.message + "; restarting the workers on every node";
    case EndKind::lost:
    case EndKind::left:
    case EndKind::joined: return end.message + "; stopping the workers to form a new round";
    default: return end.message;
  }
}

/// "31 s", "2.5 s": a duration as the hang lines say it.
std::string seconds_text(double seconds, const char* format) {
  char text[32];
  std::snprintf(text, sizeof text, format, seconds);
  return std::string(text) + " s";
}

/// The transitions, one member per event; each appends to `out`.
class Transitions {
 public:
  Transitions(SupervisorState& state, Actions& out) : s_(state), out_(out) {}

  void operator()(const event::Started&) {
    if (s_.phase != Phase::starting) return;
    if (s_.multi_node) {
      s_.phase = Phase::joining;
      out_.push_back(action::JoinRound{});
    } else {
      start_group();
    }
  }

  void operator()(const event::WorkerExited& e) {
    if (e.exit.exitcode != 0 && s_.phase == Phase::running) {
      s_.reaped_failures.emplace_back(e.exit, e.rank);
    } else if (s_.phase == Phase::stopping_after_failure && s_.start_error.empty() &&
               failed_on_its_own(e.exit.exitcode, e.exit.stop_signal_sent, e.exit.kill_sent)) {
      // Failed at about the same time as the first, before it could have reacted to our stop.
      record(e.exit, e.rank);
    }
  }

  void operator()(const event::ReapBatchDone&) {
    auto reaped = std::exchange(s_.reaped_failures, {});
    if (reaped.empty() || s_.phase != Phase::running) return;
    for (const auto& [exit, rank] : reaped) record(exit, rank);
    s_.phase = Phase::stopping_after_failure;
    // A failure that ends the job: the others' stop waits a moment (kSameMoment), so that a rank
    // failing at the same moment ends by its own failure and is in the summary. A restart does not wait.
    out_.push_back(action::StopGroup{SIGTERM, may_restart() ? std::chrono::milliseconds(0) : kSameMoment});
    if (s_.multi_node) report_failure();
  }

  void operator()(const event::StartFailed& e) {
    if (!s_.group_running || !s_.start_error.empty()) return;  // only a group being started fails to start
    s_.start_error = e.message;
    s_.start_error_node_unfit = e.node_unfit;
    if (s_.phase == Phase::stopping_for_signal) return;  // already stopping; the signal decides the status
    s_.phase = Phase::stopping_after_failure;
    out_.push_back(action::KillGroup{});
  }

  void operator()(const event::StopSignal& e) {
    switch (s_.phase) {
      case Phase::finished: return out_.push_back(action::StopLoop{});  // nobody reads the console
      case Phase::stopping_for_signal:
        // Asked twice: the user will not wait for the grace period.
        if (s_.group_running) out_.push_back(action::KillRunning{});
        return;
      case Phase::leaving:
        // Asked (again) while telling the others: the user will not wait for close_timeout.
        if (s_.stop_signal == 0) s_.stop_signal = e.signo;
        print("received " + signal_name(e.signo) + " while leaving the round");
        return finish(s_.leave_status != 0 ? s_.leave_status : exit_status_for_signal(e.signo));
      default: break;
    }
    const Phase before = s_.phase;
    s_.phase = Phase::stopping_for_signal;
    s_.stop_signal = e.signo;
    if (s_.group_running) return out_.push_back(action::StopGroup{e.signo});
    // No workers to stop: joining a round, or waiting for the other nodes.
    std::string where = " before the workers started";
    if (s_.multi_node) where = before == Phase::waiting_for_others ? " while waiting for the other nodes" : " while joining a round";
    print("received " + signal_name(e.signo) + where);
    finish(exit_status_for_signal(e.signo));
  }

  void operator()(const event::GroupDone&) {
    if (!s_.group_running) return;
    s_.group_running = false;
    if (s_.multi_node) return group_done_in_round();
    if (!s_.start_error.empty()) {
      print(s_.start_error);
      return finish(kExitJobFailed);
    }
    if (s_.phase == Phase::stopping_for_signal) {
      print("received " + signal_name(s_.stop_signal) + ", workers stopped");
      return finish(exit_status_for_signal(s_.stop_signal));
    }
    if (s_.failures == 0 && s_.hang.empty()) return finish(kExitSuccess);
    if (may_restart()) {
      ++s_.restart_count;
      const std::string what = !s_.hang.empty() ? "hang: " + s_.hang
                                                : "rank " + std::to_string(s_.first_failed_rank) + " failed (" +
                                                      describe_exitcode(s_.first_failed_exitcode) + ")";
      print(what + "; restarting the worker group, restart " + std::to_string(s_.restart_count) + " of " +
            std::to_string(s_.max_restarts));
      return start_group();
    }
    out_.push_back(action::PrintFailureSummary{});
    finish(kExitJobFailed);
  }

  void operator()(const event::RoundFormed& e) {
    if (s_.phase != Phase::joining) return;  // stopping for a signal: the round goes on without us
    s_.round = e.decision.round;
    s_.round_end.reset();
    s_.restart_count = e.decision.restart_count;
    out_.push_back(action::EnterRound{e.decision});
    start_group();
  }

  void operator()(const event::RoundEnded& e) {
    if (!s_.round || e.round != *s_.round || s_.round_end || s_.phase == Phase::finished) return;
    s_.round_end = e.end;
    // This node's own leaving, read back from the store: it said why it leaves already, and no new
    // round is formed here.
    const bool own_leaving = e.end.kind == EndKind::left && e.end.node == s_.node_id;
    if (!rendezvous::ends_the_job(e.end.kind) && !own_leaving) print(describe_end_here(e.end));
    if (s_.phase == Phase::running) {
      s_.phase = Phase::stopping_for_round_end;
      out_.push_back(action::StopGroup{SIGTERM});
    } else if (!s_.group_running && s_.phase != Phase::stopping_for_signal && s_.phase != Phase::leaving) {
      // Stopped already (a failure here, reported), or waiting for the others: decide now. While
      // leaving or stopping for a signal, this node goes whatever the round's end.
      after_round();
    }
  }

  void operator()(const event::RendezvousFailed& e) {
    if (s_.phase == Phase::finished) return;
    // The others read the same error from our store (if we host it): it stays up until they have.
    if (e.told_to_every_node) out_.push_back(action::LingerStore{});
    // Leaving: this node goes anyway, with the status it leaves with; the others may no longer be told.
    if (s_.phase == Phase::leaving) return finish(s_.leave_status);
    if (!s_.rendezvous_error.empty()) return;
    s_.rendezvous_error = e.message;
    if (s_.group_running) {
      if (s_.phase != Phase::stopping_for_signal) {
        s_.phase = Phase::stopping_after_failure;
        out_.push_back(action::StopGroup{SIGTERM});
      }
      return;
    }
    print("rendezvous: " + e.message);
    finish(kExitJobFailed);
  }

  void operator()(const event::LeaveDone&) {
    if (s_.phase == Phase::leaving) finish(s_.leave_status);
  }

  void operator()(const event::HangDetected& e) {
    // Stopping, joining, waiting: no workers to look at. Capturing: the same hang, still being looked at.
    if (s_.phase != Phase::running || s_.capturing) return;
    ++s_.hangs;
    s_.capturing = true;
    s_.hang_found = "no rank made progress for " + seconds_text(e.idle_seconds, "%.0f") + " (--hang-timeout " +
                    seconds_text(e.timeout_seconds, "%g") + ")";
    print("hang: " + s_.hang_found + "; capturing every rank's stacks");
    out_.push_back(action::CaptureStacks{});
  }

  void operator()(const event::StacksCaptured&) {
    if (!s_.capturing) return;
    s_.capturing = false;
    std::string found = std::exchange(s_.hang_found, {});
    // Reported and left running; or the attempt ended meanwhile (a failure, a signal, a round's end).
    if (s_.phase != Phase::running || s_.hang_action == HangAction::report) return;
    s_.hang = std::move(found);
    s_.phase = Phase::stopping_after_failure;
    print(std::string("hang: stopping the workers (--hang-action ") + hang_action_name(s_.hang_action) + ")");
    out_.push_back(action::StopGroup{SIGTERM});
    if (s_.multi_node) report_failure();
  }

 private:
  void print(std::string text) { out_.push_back(action::Print{std::move(text)}); }

  void start_group() {
    s_.phase = Phase::running;
    s_.group_running = true;
    s_.failures = 0;
    s_.first_failed_rank = -1;
    s_.first_failed_exitcode = 0;
    s_.start_error.clear();
    s_.start_error_node_unfit = false;
    s_.capturing = false;
    s_.hang_found.clear();
    s_.hang.clear();
    out_.push_back(action::StartGroup{});
  }

  void record(const WorkerExit& exit, int rank) {
    if (s_.failures++ == 0) {
      s_.first_failed_rank = rank;
      s_.first_failed_exitcode = exit.exitcode;
    }
    out_.push_back(action::RecordFailure{exit, rank});
  }

  bool restart_left() const { return s_.restart_count < s_.max_restarts; }
  /// A hang ends the job under --hang-action stop, whatever restarts are left.
  bool may_restart() const { return restart_left() && (s_.hang.empty() || s_.hang_action == HangAction::restart); }

  void report_failure() {
    const bool restart = may_restart();
    std::string message = !s_.hang.empty() ? "hang on node " + s_.node_description + ": " + s_.hang
                                           : "rank " + std::to_string(s_.first_failed_rank) + " failed on node " +
                                                 s_.node_description + " (" +
                                                 describe_exitcode(s_.first_failed_exitcode) + ")";
    if (restart) message += ", restart " + std::to_string(s_.restart_count + 1) + " of " + std::to_string(s_.max_restarts);
    out_.push_back(action::ReportFailure{RoundEnd{restart ? EndKind::failure : EndKind::fatal, s_.node_id, message}});
  }

  void group_done_in_round() {
    if (s_.phase == Phase::stopping_for_signal) {
      const std::string name = signal_name(s_.stop_signal);
      print("received " + name + ", workers stopped");
      return leave(RoundEnd{EndKind::left, s_.node_id, "node " + s_.node_description + " left (" + name + ")"},
                   exit_status_for_signal(s_.stop_signal));
    }
    if (!s_.rendezvous_error.empty()) {
      print("rendezvous: " + s_.rendezvous_error);
      return finish(kExitJobFailed);
    }
    if (!s_.start_error.empty() && s_.start_error_node_unfit && s_.elastic) {
      // This node cannot run workers (a GPU): the others form the next round without it.
      print(s_.start_error);
      return leave(RoundEnd{EndKind::left, s_.node_id, "node " + s_.node_description + " left: " + s_.start_error},
                   kExitJobFailed);
    }
    if (!s_.start_error.empty()) {  // the workers could not be started here: nowhere else can the job go on
      print(s_.start_error);
      return leave(RoundEnd{EndKind::fatal, s_.node_id,
                            "node " + s_.node_description + " could not start its workers: " + s_.start_error},
                   kExitJobFailed);
    }
    if (s_.phase == Phase::running) {  // every worker here succeeded: wait for the other nodes
      s_.phase = Phase::waiting_for_others;
      out_.push_back(action::MarkFinished{});
    }
    if (s_.round_end) after_round();
    // Else the round's end (this node's failure report, or another node's) is on its way.
  }

  /// The group is stopped and the round's end is known: restart, finish, or fail.
  void after_round() {
    const RoundEnd end = *s_.round_end;
    if (rendezvous::ends_the_job(end.kind)) out_.push_back(action::LingerStore{});
    if (end.kind == EndKind::finished) return finish(kExitSuccess);
    if (end.kind == EndKind::fatal) {
      if (end.node == s_.node_id && (s_.failures > 0 || !s_.hang.empty())) {
        out_.push_back(action::PrintFailureSummary{});
      } else {
        print("the job failed: " + end.message);
      }
      return finish(kExitJobFailed);
    }
    // A new round: workers restart (failure) or the membership changed (lost, left, joined).
    out_.push_back(action::CloseRound{});
    s_.round.reset();
    s_.round_end.reset();
    s_.phase = Phase::joining;
    out_.push_back(action::JoinRound{});
  }

  /// Tells the other nodes this node is going (LeaveDone follows), then finishes.
  void leave(RoundEnd end, int exit_status) {
    if (!s_.round || s_.round_end) return finish(exit_status);
    // An end that ends the job is read by the others from the store, which may be ours.
    if (rendezvous::ends_the_job(end.kind)) out_.push_back(action::LingerStore{});
    s_.phase = Phase::leaving;
    s_.leave_status = exit_status;
    out_.push_back(action::Leave{std::move(end)});
  }

  void finish(int exit_status) {
    s_.phase = Phase::finished;
    s_.exit_status = exit_status;
    out_.push_back(action::Finish{exit_status, s_.stop_signal != 0});
  }

  SupervisorState& s_;
  Actions& out_;
};

}  // namespace

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::starting: return "starting";
    case Phase::joining: return "joining";
    case Phase::running: return "running";
    case Phase::stopping_after_failure: return "stopping_after_failure";
    case Phase::stopping_for_round_end: return "stopping_for_round_end";
    case Phase::stopping_for_signal: return "stopping_for_signal";
    case Phase::waiting_for_others: return "waiting_for_others";
    case Phase::leaving: return "leaving";
    case Phase::finished: return "finished";
  }
  return "?";
}

std::vector<SupervisorAction> next(SupervisorState& state, const SupervisorEvent& event) {
  Actions actions;
  std::visit(Transitions(state, actions), event);
  return actions;
}

namespace {
struct ActionDescriber {
  std::string operator()(const action::StartGroup&) const { return "start"; }
  std::string operator()(const action::StopGroup& a) const {
    const std::string held = a.hold.count() > 0 ? " after " + std::to_string(a.hold.count()) + " ms" : "";
    return "stop(" + signal_name(a.signo) + held + ")";
  }
  std::string operator()(const action::KillGroup&) const { return "kill"; }
  std::string operator()(const action::KillRunning&) const { return "kill-running"; }
  std::string operator()(const action::RecordFailure& a) const { return "record(rank " + std::to_string(a.rank) + ")"; }
  std::string operator()(const action::ReportFailure& a) const {
    return "report(" + std::string(rendezvous::end_kind_name(a.end.kind)) + ": " + a.end.message + ")";
  }
  std::string operator()(const action::MarkFinished&) const { return "mark-finished"; }
  std::string operator()(const action::JoinRound&) const { return "join"; }
  std::string operator()(const action::EnterRound& a) const { return "enter(round " + std::to_string(a.decision.round) + ")"; }
  std::string operator()(const action::CloseRound&) const { return "close-round"; }
  std::string operator()(const action::Leave& a) const {
    return "leave(" + std::string(rendezvous::end_kind_name(a.end.kind)) + ": " + a.end.message + ")";
  }
  std::string operator()(const action::LingerStore&) const { return "linger"; }
  std::string operator()(const action::Print& a) const { return "print(" + a.text + ")"; }
  std::string operator()(const action::PrintFailureSummary&) const { return "summary"; }
  std::string operator()(const action::Finish& a) const {
    return "finish(" + std::to_string(a.exit_status) + (a.impatient ? ", impatient)" : ")");
  }
  std::string operator()(const action::StopLoop&) const { return "stop-loop"; }
  std::string operator()(const action::CaptureStacks&) const { return "capture-stacks"; }
};
}  // namespace

std::string describe_action(const SupervisorAction& action) { return std::visit(ActionDescriber{}, action); }

}  // namespace ddprun::launcher

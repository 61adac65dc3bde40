// The supervisor's decisions by table: every event in every phase, for one node and for many.
// Each row starts from the phase's fixture (below), applies one event, and gives the actions (as
// describe_action shows them, joined by " | ") and the phase after. SupervisorTable.CoversEveryPair
// fails when a (phase, event) pair has no row.
#include <signal.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <set>

#include "launcher/supervisor.hpp"

namespace ddprun::launcher {
namespace {

using rendezvous::EndKind;
using rendezvous::RoundEnd;

constexpr const char* kSelf = "self-1";
/// The GPU gate's refusal (devices/gpu_gate_rule.hpp), a StartFailed with node_unfit.
constexpr const char* kGpuRefusal =
    "GPU 1 (GPU-00000001-0000-0000-0000-000000000000, bus 00000000:11:00.0) has fallen off the bus or is "
    "inaccessible (NVML: GPU_IS_LOST): no worker started (--gpu-health off starts them anyway)";

WorkerExit exit_of(int local_rank, int exitcode, int stop_signal_sent = 0, bool kill_sent = false) {
  WorkerExit exit;
  exit.local_rank = local_rank;
  exit.pid = 1000 + local_rank;
  exit.exitcode = exitcode;
  exit.stop_signal_sent = stop_signal_sent;
  exit.kill_sent = kill_sent;
  return exit;
}

/// The state of a node in `phase`, as it typically is there: rank 1 (of ranks 0-1 here) failed
/// with exit code 3 in the failure phases; multi-node nodes are in round 4.
SupervisorState fixture(Phase phase, bool multi) {
  SupervisorState s;
  s.multi_node = multi;
  s.max_restarts = 2;
  s.node_id = multi ? kSelf : "";
  s.node_description = multi ? "hostA (10.0.0.1)" : "";
  s.phase = phase;
  const bool in_round = multi && phase != Phase::starting && phase != Phase::joining;
  if (in_round) s.round = 4;
  switch (phase) {
    case Phase::starting:
    case Phase::joining: break;
    case Phase::running:
      s.group_running = true;
      s.reaped_failures.emplace_back(exit_of(1, 3), 1);  // reaped in the batch now ending
      break;
    case Phase::stopping_after_failure:
      s.group_running = true;
      s.failures = 1;
      s.first_failed_rank = 1;
      s.first_failed_exitcode = 3;
      break;
    case Phase::stopping_for_round_end:
      s.group_running = true;
      s.round_end = RoundEnd{EndKind::failure, "other-2", "rank 5 failed on node hostB (10.0.0.2) (exit code 1)"};
      break;
    case Phase::stopping_for_signal:
      s.group_running = true;
      s.stop_signal = SIGTERM;
      break;
    case Phase::waiting_for_others: break;
    case Phase::leaving:
      s.stop_signal = SIGTERM;
      s.leave_status = 128 + SIGTERM;
      break;
    case Phase::finished: s.exit_status = 0; break;
  }
  return s;
}

rendezvous::RoundDecision decision(int round, int restart_count) {
  rendezvous::RoundDecision d;
  d.round = round;
  d.restart_count = restart_count;
  d.nodes.push_back(rendezvous::NodeInfo{kSelf, "hostA", "10.0.0.1", 2, 0, 0, -1, -1});
  return d;
}

/// The events of the table, by name.
SupervisorEvent event_named(const std::string& name) {
  if (name == "started") return event::Started{};
  if (name == "exit-failed") return event::WorkerExited{exit_of(0, 7), 0};
  if (name == "exit-ok") return event::WorkerExited{exit_of(0, 0), 0};
  if (name == "exit-by-our-stop") return event::WorkerExited{exit_of(0, -SIGTERM, SIGTERM), 0};
  if (name == "reap-batch-done") return event::ReapBatchDone{};
  if (name == "start-failed") return event::StartFailed{"cannot start local rank 0: fork failed"};
  if (name == "start-failed-gpu") return event::StartFailed{kGpuRefusal, true};
  if (name == "sigint") return event::StopSignal{SIGINT};
  if (name == "group-done") return event::GroupDone{};
  if (name == "round-formed") return event::RoundFormed{decision(5, 1)};
  if (name == "round-4-failed") {
    return event::RoundEnded{4, RoundEnd{EndKind::failure, "other-2", "rank 5 failed on node hostB (10.0.0.2) (exit code 1)"}};
  }
  if (name == "round-4-finished") return event::RoundEnded{4, RoundEnd{EndKind::finished, "other-2", "all nodes finished"}};
  if (name == "round-4-fatal") {
    return event::RoundEnded{4, RoundEnd{EndKind::fatal, "other-2", "rank 5 failed on node hostB (10.0.0.2) (exit code 1)"}};
  }
  if (name == "round-3-lost") return event::RoundEnded{3, RoundEnd{EndKind::lost, "other-2", "node hostB is gone"}};
  if (name == "rdzv-failed") return event::RendezvousFailed{"lost the rendezvous store", false};
  if (name == "rdzv-failed-told") return event::RendezvousFailed{"node rank 1 is taken", true};
  if (name == "leave-done") return event::LeaveDone{};
  if (name == "hang") return event::HangDetected{31.2, 30};
  if (name == "stacks-captured") return event::StacksCaptured{};
  ADD_FAILURE() << "no event " << name;
  return event::Started{};
}

struct Row {
  Phase phase;
  bool multi;
  const char* event;
  const char* actions;  ///< describe_action of each, joined by " | "
  Phase after;
  /// A variant of the phase's fixture, applied before the event (nullptr: the fixture as it is).
  void (*tweak)(SupervisorState&) = nullptr;
};

std::string run(SupervisorState& state, const std::string& event) {
  std::string joined;
  for (const auto& action : next(state, event_named(event))) {
    if (!joined.empty()) joined += " | ";
    joined += describe_action(action);
  }
  return joined;
}

using P = Phase;

// Variants of the fixtures, for the rows that need one.
void no_restart_left(SupervisorState& s) { s.restart_count = s.max_restarts; }
void start_error(SupervisorState& s) { s.start_error = "cannot start local rank 0: fork failed"; }
void group_gone(SupervisorState& s) { s.group_running = false; }
// The GPU gate refused the start: this node cannot run workers, another might.
void gpu_refused(SupervisorState& s) {
  s.start_error = kGpuRefusal;
  s.start_error_node_unfit = true;
}
void gpu_refused_elastic(SupervisorState& s) {
  gpu_refused(s);
  s.elastic = true;
}
void not_in_a_round(SupervisorState& s) { s.round.reset(); }
void fatal_here_known(SupervisorState& s) {
  s.round_end = RoundEnd{EndKind::fatal, kSelf, "rank 1 failed on node hostA (10.0.0.1) (exit code 3)"};
}
void a_second_failure_reaped(SupervisorState& s) { s.reaped_failures.emplace_back(exit_of(0, -SIGSEGV), 0); }
// A hang found, its stacks being captured, under each --hang-action.
constexpr const char* kHang = "no rank made progress for 31 s (--hang-timeout 30 s)";
void capturing(SupervisorState& s) {
  s.capturing = true;
  s.hang_found = kHang;
  s.hangs = 1;
}
void capturing_to_stop(SupervisorState& s) {
  capturing(s);
  s.hang_action = HangAction::stop;
}
void capturing_to_restart(SupervisorState& s) {
  capturing(s);
  s.hang_action = HangAction::restart;
}
// The workers stopped for a hang (no worker failed).
void stopped_for_hang(SupervisorState& s, HangAction action) {
  s.hang_action = action;
  s.hang = kHang;
  s.failures = 0;
  s.first_failed_rank = -1;
  s.first_failed_exitcode = 0;
}
void stopped_for_hang_to_stop(SupervisorState& s) { stopped_for_hang(s, HangAction::stop); }
void stopped_for_hang_to_restart(SupervisorState& s) { stopped_for_hang(s, HangAction::restart); }
void stopped_for_hang_no_restart_left(SupervisorState& s) {
  stopped_for_hang(s, HangAction::restart);
  s.restart_count = s.max_restarts;
}
void stopped_for_hang_fatal_here_known(SupervisorState& s) {
  stopped_for_hang(s, HangAction::stop);
  s.round_end = RoundEnd{EndKind::fatal, kSelf, std::string("hang on node hostA (10.0.0.1): ") + kHang};
}
constexpr bool single = false;
constexpr bool multi = true;

// clang-format off
const Row kTable[] = {
#include "supervisor_table.inc"
};
// clang-format on

TEST(SupervisorTable, EveryRow) {
  for (const Row& row : kTable) {
    SupervisorState state = fixture(row.phase, row.multi);
    if (row.tweak) row.tweak(state);
    std::string got = run(state, row.event);
    EXPECT_EQ(got, row.actions) << (row.multi ? "multi" : "single") << ", " << phase_name(row.phase) << ", "
                                << row.event;
    EXPECT_EQ(phase_name(state.phase), std::string(phase_name(row.after)))
        << (row.multi ? "multi" : "single") << ", " << phase_name(row.phase) << ", " << row.event;
  }
}

// A refused start's flag is carried from the event to the end of the group: an elastic node
// leaves (the others go on without it), a static one fails the job as any start failure does.
TEST(SupervisorGpuRefusal, AnElasticNodeLeavesAStaticOneFailsTheJob) {
  for (bool elastic : {true, false}) {
    SupervisorState state = fixture(P::running, multi);
    state.elastic = elastic;
    EXPECT_EQ(run(state, "start-failed-gpu"), "kill");
    EXPECT_TRUE(state.start_error_node_unfit);
    const std::string end = run(state, "group-done");
    EXPECT_EQ(end, elastic ? std::string("print(") + kGpuRefusal + ") | leave(left: node hostA (10.0.0.1) left: " + kGpuRefusal + ")"
                           : std::string("print(") + kGpuRefusal + ") | linger | leave(fatal: node hostA (10.0.0.1) could not start its workers: " + kGpuRefusal + ")")
        << (elastic ? "elastic" : "static");
    EXPECT_EQ(state.leave_status, 1);
  }
  // A single node: exit 1, whatever restarts are left (a lost GPU fails every attempt).
  SupervisorState single_node = fixture(P::running, single);
  EXPECT_EQ(run(single_node, "start-failed-gpu"), "kill");
  EXPECT_EQ(run(single_node, "group-done"), std::string("print(") + kGpuRefusal + ") | finish(1)");
}

// A node that leaves reads its own end back from the store: it says nothing of a new round.
TEST(SupervisorGpuRefusal, TheLeavingNodeReadsItsOwnEndBackSilently) {
  SupervisorState state = fixture(P::running, multi);
  state.elastic = true;
  run(state, "start-failed-gpu");
  run(state, "group-done");
  ASSERT_EQ(phase_name(state.phase), std::string("leaving"));
  const auto actions = next(state, event::RoundEnded{*state.round, RoundEnd{EndKind::left, kSelf, "node hostA (10.0.0.1) left: GPU"}});
  for (const auto& action : actions) EXPECT_EQ(describe_action(action).find("print("), std::string::npos) << describe_action(action);
  // Another node's leaving is still said.
  SupervisorState other = fixture(P::running, multi);
  const auto said = next(other, event::RoundEnded{*other.round, RoundEnd{EndKind::left, "other-2", "node hostB left (SIGTERM)"}});
  ASSERT_FALSE(said.empty());
  EXPECT_EQ(describe_action(said.front()), "print(node hostB left (SIGTERM); stopping the workers to form a new round)");
}

/// The event kinds (variant alternatives) and phases every table must cover.
const std::vector<std::string> kEventsPerKind = {"started",    "exit-failed", "reap-batch-done", "start-failed",
                                                 "sigint",     "group-done",  "round-formed",    "round-4-failed",
                                                 "rdzv-failed", "leave-done", "hang",            "stacks-captured"};
const Phase kPhases[] = {P::starting, P::joining, P::running, P::stopping_after_failure, P::stopping_for_round_end,
                         P::stopping_for_signal, P::waiting_for_others, P::leaving, P::finished};

TEST(SupervisorTable, CoversEveryPair) {
  std::set<std::tuple<bool, Phase, std::size_t>> covered;
  for (const Row& row : kTable) covered.emplace(row.multi, row.phase, event_named(row.event).index());
  for (bool m : {single, multi}) {
    for (Phase phase : kPhases) {
      // A single-node job has no rounds: it is never joining, waiting for others or leaving, and
      // gets no round or rendezvous events.
      if (!m && (phase == P::joining || phase == P::stopping_for_round_end || phase == P::waiting_for_others ||
                 phase == P::leaving)) {
        continue;
      }
      for (const auto& name : kEventsPerKind) {
        if (!m && (name.rfind("round", 0) == 0 || name.rfind("rdzv", 0) == 0 || name == "leave-done")) continue;
        EXPECT_TRUE(covered.count({m, phase, event_named(name).index()}))
            << "no row for " << (m ? "multi" : "single") << ", " << phase_name(phase) << ", " << name;
      }
    }
  }
}

/// Whole lives, event after event, from a fresh state: the table's rows chained as the agent sees them.
std::vector<std::string> life(SupervisorState& state, const std::vector<SupervisorEvent>& events) {
  std::vector<std::string> lines;
  for (const auto& e : events) {
    std::string joined;
    for (const auto& action : next(state, e)) {
      if (!joined.empty()) joined += " | ";
      joined += describe_action(action);
    }
    lines.push_back(joined);
  }
  return lines;
}

TEST(SupervisorLife, SingleNodeRestartsUntilNoneAreLeftThenFails) {
  SupervisorState s;
  s.max_restarts = 1;
  auto failed_batch = [](int local_rank) -> std::vector<SupervisorEvent> {
    return {event::WorkerExited{exit_of(local_rank, 1), local_rank}, event::ReapBatchDone{},
            event::WorkerExited{exit_of(1 - local_rank, -SIGTERM, SIGTERM), 1 - local_rank}, event::GroupDone{}};
  };
  std::vector<SupervisorEvent> events = {event::Started{}};
  for (auto& e : failed_batch(1)) events.push_back(e);
  for (auto& e : failed_batch(0)) events.push_back(e);
  EXPECT_EQ(life(s, events), (std::vector<std::string>{
                                 "start",
                                 "", "record(rank 1) | stop(SIGTERM)", "",
                                 "print(rank 1 failed (exit code 1); restarting the worker group, restart 1 of 1) | start",
                                 // The last failure ends the job: the others' stop waits a moment (kSameMoment).
                                 "", "record(rank 0) | stop(SIGTERM after 100 ms)", "",
                                 "summary | finish(1)",
                             }));
  EXPECT_EQ(s.exit_status, 1);
}

TEST(SupervisorLife, MultiNodeFailureHereRestartsEveryNodeThroughANewRound) {
  SupervisorState s;
  s.multi_node = true;
  s.max_restarts = 3;
  s.node_id = kSelf;
  s.node_description = "hostA (10.0.0.1)";
  const RoundEnd failure{EndKind::failure, kSelf, "rank 1 failed on node hostA (10.0.0.1) (exit code 1), restart 1 of 3"};
  EXPECT_EQ(life(s, {event::Started{}, event::RoundFormed{decision(0, 0)}, event::WorkerExited{exit_of(1, 1), 1},
                     event::ReapBatchDone{}, event::GroupDone{}, event::RoundEnded{0, failure},
                     event::RoundFormed{decision(1, 1)}, event::GroupDone{}, event::RoundEnded{1, RoundEnd{EndKind::finished, "x", "done"}}}),
            (std::vector<std::string>{
                "join",
                "enter(round 0) | start",
                "",
                "record(rank 1) | stop(SIGTERM) | report(failure: rank 1 failed on node hostA (10.0.0.1) (exit code 1), restart 1 of 3)",
                "",
                "print(rank 1 failed on node hostA (10.0.0.1) (exit code 1), restart 1 of 3; restarting the workers on every node) | close-round | join",
                "enter(round 1) | start",
                "mark-finished",
                "linger | finish(0)",
            }));
  EXPECT_EQ(s.restart_count, 1);
}

TEST(SupervisorLife, HangReportedTwiceThenStoppedEndsTheJobWhateverRestartsAreLeft) {
  SupervisorState s;
  s.max_restarts = 3;
  s.hang_action = HangAction::stop;
  EXPECT_EQ(life(s, {event::Started{}, event::HangDetected{30.4, 30}, event::HangDetected{31.4, 30},
                     event::StacksCaptured{}, event::StacksCaptured{},
                     event::WorkerExited{exit_of(0, -SIGTERM, SIGTERM), 0}, event::ReapBatchDone{}, event::GroupDone{}}),
            (std::vector<std::string>{
                "start",
                "print(hang: no rank made progress for 30 s (--hang-timeout 30 s); capturing every rank's stacks) | capture-stacks",
                "",
                "print(hang: stopping the workers (--hang-action stop)) | stop(SIGTERM)",
                "",
                "",
                "",
                "summary | finish(1)",
            }));
  EXPECT_EQ(s.hangs, 1);
  EXPECT_EQ(s.exit_status, 1);
}

TEST(SupervisorLife, HangRestartsUntilNoneAreLeftAndAReportedHangOnlyReports) {
  SupervisorState s;
  s.max_restarts = 1;
  s.hang_action = HangAction::restart;
  EXPECT_EQ(life(s, {event::Started{}, event::HangDetected{12, 10}, event::StacksCaptured{}, event::GroupDone{},
                     event::HangDetected{10, 10}, event::StacksCaptured{}, event::GroupDone{}}),
            (std::vector<std::string>{
                "start",
                "print(hang: no rank made progress for 12 s (--hang-timeout 10 s); capturing every rank's stacks) | capture-stacks",
                "print(hang: stopping the workers (--hang-action restart)) | stop(SIGTERM)",
                "print(hang: no rank made progress for 12 s (--hang-timeout 10 s); restarting the worker group, restart 1 of 1) | start",
                "print(hang: no rank made progress for 10 s (--hang-timeout 10 s); capturing every rank's stacks) | capture-stacks",
                "print(hang: stopping the workers (--hang-action restart)) | stop(SIGTERM)",
                "summary | finish(1)",
            }));
  SupervisorState reported;
  EXPECT_EQ(life(reported, {event::Started{}, event::HangDetected{12, 10}, event::StacksCaptured{},
                            event::HangDetected{15, 10}, event::StacksCaptured{}, event::GroupDone{}}),
            (std::vector<std::string>{
                "start",
                "print(hang: no rank made progress for 12 s (--hang-timeout 10 s); capturing every rank's stacks) | capture-stacks",
                "",
                "print(hang: no rank made progress for 15 s (--hang-timeout 10 s); capturing every rank's stacks) | capture-stacks",
                "",
                "finish(0)",
            }));
  EXPECT_EQ(reported.hangs, 2);
}

TEST(SupervisorLife, SecondSignalWhileLeavingDoesNotWaitForTheStore) {
  SupervisorState s;
  s.multi_node = true;
  s.node_id = kSelf;
  s.node_description = "hostA (10.0.0.1)";
  EXPECT_EQ(life(s, {event::Started{}, event::RoundFormed{decision(2, 0)}, event::StopSignal{SIGINT}, event::GroupDone{},
                     event::StopSignal{SIGINT}, event::LeaveDone{}}),
            (std::vector<std::string>{
                "join",
                "enter(round 2) | start",
                "stop(SIGINT)",
                "print(received SIGINT, workers stopped) | leave(left: node hostA (10.0.0.1) left (SIGINT))",
                "print(received SIGINT while leaving the round) | finish(130, impatient)",
                "",
            }));
}

/// DDPRUN_PRINT_SUPERVISOR_TABLE=1: prints every pair's outcome as table rows, to review by hand
/// when the rules change.
TEST(SupervisorTable, PrintWhenAsked) {
  if (!std::getenv("DDPRUN_PRINT_SUPERVISOR_TABLE")) GTEST_SKIP() << "set DDPRUN_PRINT_SUPERVISOR_TABLE=1 to print";
  const std::vector<std::string> events = {"started",      "exit-failed",   "exit-ok",          "exit-by-our-stop",
                                           "reap-batch-done", "start-failed", "sigint",          "group-done",
                                           "round-formed", "round-4-failed", "round-4-finished", "round-3-lost",
                                           "rdzv-failed",  "rdzv-failed-told", "leave-done", "hang",
                                           "stacks-captured"};
  for (bool m : {single, multi}) {
    for (Phase phase : kPhases) {
      if (!m && (phase == P::joining || phase == P::stopping_for_round_end || phase == P::waiting_for_others ||
                 phase == P::leaving)) {
        continue;
      }
      for (const auto& name : events) {
        if (!m && name.rfind("round", 0) == 0) continue;
        if (!m && name.rfind("rdzv", 0) == 0) continue;
        if (!m && name == "leave-done") continue;
        SupervisorState state = fixture(phase, m);
        std::string got = run(state, name);
        std::cout << "    {P::" << phase_name(phase) << ", " << (m ? "multi" : "single") << ", \"" << name << "\", \""
                  << got << "\", P::" << phase_name(state.phase) << "},\n";
      }
    }
  }
}

}  // namespace
}  // namespace ddprun::launcher

#pragma once
/// HangWatch (--hang-timeout): each status sample goes through the hang rule (hang_rule.hpp); a
/// hang newly found is an event and a call to `on_hang`, which the agent turns into the supervisor's
/// HangDetected. When the supervisor asks for stacks (capture), every local rank's are captured,
/// the digest printed once every rank can be placed, each rank's stacks written to
/// attempt_<n>/stacks/rank_<rank>.txt, in a multi-node job the whole job's digest gathered through
/// the job board, and then `on_captured` called, after which --hang-action has its way.
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launcher/observe/attempt_view.hpp"
#include "launcher/observe/hang_action.hpp"
#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

class BoardLink;
class EventRecorder;
class HangRule;
class NodeStacks;
class RunLogs;
class StatusWatch;
struct CapturedRank;
struct HangReport;

struct HangWatchSettings {
  double timeout_s = 0;  ///< --hang-timeout; 0: no watch
  HangAction action = HangAction::report;
  std::string host;
};

class HangWatch {
 public:
  struct Callbacks {
    std::function<void(double idle_seconds, double timeout_seconds)> on_hang;
    std::function<void()> on_captured;
  };

  HangWatch(HangWatchSettings settings, const AttemptView& attempt, const RunLogs& logs, EventRecorder& events,
            StatusWatch& status, NodeStacks& stacks, BoardLink& board, Callbacks callbacks);
  ~HangWatch();
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  /// A status sample (a StatusWatch listener).
  void on_sample(const NodeStatus& node);
  /// The supervisor's CaptureStacks: the stacks of the ranks the hang's sample showed.
  void capture();
  /// What the failure summary says of the last hang: when, where the stacks are, the digest.
  void fill(HangReport& report) const;

 private:
  void print_digest(const std::vector<CapturedRank>& ranks);
  void write_stack_files(const std::vector<CapturedRank>& ranks);

  HangWatchSettings settings_;
  const AttemptView& attempt_;
  const RunLogs& logs_;
  EventRecorder& events_;
  StatusWatch& status_;
  NodeStacks& stacks_;
  BoardLink& board_;
  Callbacks callbacks_;
  std::unique_ptr<HangRule> rule_;       ///< made at the first sample
  std::unique_ptr<NodeStatus> sample_;   ///< the sample that showed the hang: whose stacks to take
  std::chrono::system_clock::time_point time_;
  std::filesystem::path stacks_dir_;      ///< attempt_<n>/stacks of the last capture
  std::vector<std::string> digest_;       ///< the last capture's digest (the failure summary repeats it)
};

}  // namespace ddprun::launcher

// The Agent's hang watch (--hang-timeout): each status sample goes through the hang rule; a hang
// found is a HangDetected event; the supervisor's CaptureStacks has every local rank's stacks
// captured (stack_capture.hpp), the digest printed once every rank can be placed, each rank's stacks
// written to attempt_<n>/stacks/rank_<rank>.txt, and StacksCaptured dispatched, after which
// --hang-action has its way (supervisor.cpp). Also where workers get ddprun's Python folder.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launcher/agent.hpp"
#include "launcher/agent_support.hpp"
#include "launcher/output/console.hpp"
#include "launcher/output/console_output.hpp"
#include "launcher/observe/hang_rule.hpp"
#include "launcher/observe/hang_summary.hpp"
#include "launcher/observe/job_event.hpp"
#include "launcher/observe/job_status.hpp"
#include "launcher/base/python_dir.hpp"
#include "launcher/observe/capture_queue.hpp"
#include "launcher/observe/stack_capture.hpp"
#include "launcher/observe/stack_digest.hpp"
#include "launcher/observe/status_monitor.hpp"
#include "launcher/base/terminal_safe.hpp"

namespace ddprun::launcher {
namespace {

/// In each worker's folder: where its faulthandler appends its dumps.
constexpr const char* kPythonStacksFile = "python_stacks.txt";

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// Writes `text` to a new regular file at `path`; the reason when it cannot.
std::string write_file(const std::filesystem::path& path, const std::string& text) {
  // Non-blocking and no symlink followed: a FIFO or a link left at the path must not hold the loop.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY, 0644);
  if (fd < 0) return std::strerror(errno);
  std::string error;
  if (!write_all(fd, text)) error = "short write";
  ::close(fd);
  return error;
}

}  // namespace

void Agent::add_python_hooks(WorkerSpec& spec, const std::filesystem::path& dir) {
  if (!python_dir_looked_up_) {
    python_dir_ = find_python_dir();
    python_dir_looked_up_ = true;
  }
  if (!python_dir_) return;  // a ddprun copied away from its tree: no Python stacks, no ddprun_progress
  spec.python_dir = python_dir_->string();
  spec.python_stacks_file = (dir / kPythonStacksFile).string();
  spec.stacks_signal = stack_dump_signal();
}

void Agent::watch_for_hang(const NodeStatus& node) {
  const double timeout = plan_.config.hang_timeout_s;
  if (timeout <= 0) return;
  if (!hang_rule_) hang_rule_ = std::make_unique<HangRule>(HangRuleSettings{timeout});
  const HangVerdict verdict = hang_rule_->observe(node);
  if (!verdict.newly_hung) return;
  hang_sample_ = std::make_unique<NodeStatus>(node);
  hang_time_ = std::chrono::system_clock::now();
  if (monitor_) monitor_->count_hang();  // every later sample (status page, /metrics) carries the count
  record_event({.kind = JobEventKind::hang_detected,
                .detail = {{"idle_seconds", verdict.idle_seconds},
                           {"timeout_seconds", timeout},
                           {"action", hang_action_name(plan_.config.hang_action)}}});
  dispatch(event::HangDetected{verdict.idle_seconds, timeout});
}

std::vector<StackTarget> Agent::stack_targets(const NodeStatus& node) const {
  std::vector<StackTarget> targets;
  for (const RankStatus& rank : node.ranks) {
    if (rank.state != RankState::running || rank.pid <= 1) continue;
    StackTarget target;
    target.rank = rank.rank;
    target.local_rank = rank.local_rank;
    target.node_rank = group_rank_;
    target.pid = rank.pid;
    if (python_dir_) target.python_stacks_file = (logs_->worker_dir(attempt_, rank.local_rank) / kPythonStacksFile).string();
    targets.push_back(std::move(target));
  }
  return targets;
}

CaptureQueue& Agent::captures() {
  if (!captures_) {
    StackCaptureSettings settings;
    settings.unwinder = find_unwinder().value_or("");
    captures_ = std::make_unique<CaptureQueue>(io_, settings);
  }
  return *captures_;
}

void Agent::capture_stacks() {
  std::vector<StackTarget> targets;
  if (hang_sample_) targets = stack_targets(*hang_sample_);
  stacks_dir_ = logs_->run_dir() / ("attempt_" + std::to_string(attempt_)) / "stacks";
  hang_digest_.clear();
  // A capture under way (an earlier hang's, someone's request) gives way: this one is newer.
  captures().for_hang(
      std::move(targets), [this](const std::vector<CapturedRank>& ranks) { print_hang_digest(ranks); },
      [this](const std::vector<CapturedRank>& ranks) {
        write_stack_files(ranks);
        std::vector<RankStacks> own;
        for (const CapturedRank& rank : ranks) own.push_back(rank.stacks);
        // Multi-node: the whole job's digest. Node 0 gathers it for every hang while the job goes
        // on; when the hang stops or restarts the job, every node gathers it before it acts, so
        // that whichever node acts first (and ends the round for the others) has it in its summary.
        const bool acts = plan_.config.hang_action != HangAction::report;
        if (acts && gather_hang_stacks(std::move(own), [this] { dispatch(event::StacksCaptured{}); })) return;
        if (!acts && group_rank_ == 0) gather_hang_stacks(std::move(own), {});
        dispatch(event::StacksCaptured{});
      });
}

void Agent::print_hang_digest(const std::vector<CapturedRank>& ranks) {
  std::vector<RankStacks> stacks;
  for (const CapturedRank& rank : ranks) stacks.push_back(rank.stacks);
  hang_digest_ = stack_digest(stacks, read_source_line);
  for (const std::string& line : hang_digest_) print_line("hang: " + terminal_safe(line));
  print_line("hang: every rank's stacks: " + (stacks_dir_ / "rank_<rank>.txt").string());
}

void Agent::write_stack_files(const std::vector<CapturedRank>& ranks) {
  std::error_code error;
  std::filesystem::create_directories(stacks_dir_, error);
  if (error) return print_line("warning: cannot make " + stacks_dir_.string() + ": " + error.message());
  const double now = unix_now();
  for (const CapturedRank& rank : ranks) {
    const std::filesystem::path file = stacks_dir_ / ("rank_" + std::to_string(rank.stacks.rank) + ".txt");
    const std::string failed = write_file(file, stack_file_text(rank, plan_.hostname, now));
    if (!failed.empty()) {
      print_line("warning: cannot write " + file.string() + ": " + failed);
      continue;
    }
    record_event({.kind = JobEventKind::stacks_written,
                  .rank = rank.stacks.rank,
                  .pid = rank.stacks.pid,
                  .detail = {{"file", file.string()}}});
  }
}

void Agent::print_failure_summary() {
  if (!failures_.empty() || state_.hang.empty()) write_stderr(format_failure_summary(plan_.config.program, failures_));
  if (state_.hang.empty()) return;
  HangReport report;
  report.program = plan_.config.program;
  report.hang = state_.hang;
  report.action = state_.hang_action;
  report.time = hang_time_;
  report.host = plan_.hostname;
  report.stacks = (stacks_dir_ / "rank_<rank>.txt").string();
  report.digest = hang_digest_;
  write_stderr(format_hang_summary(report));
}

}  // namespace ddprun::launcher

#include "launcher/observe/hang_watch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "launcher/base/unix_time.hpp"
#include "launcher/base/terminal_safe.hpp"
#include "launcher/observe/board_link.hpp"
#include "launcher/observe/capture_queue.hpp"
#include "launcher/observe/event_recorder.hpp"
#include "launcher/observe/hang_rule.hpp"
#include "launcher/observe/hang_summary.hpp"
#include "launcher/observe/node_stacks.hpp"
#include "launcher/observe/stack_capture.hpp"
#include "launcher/observe/stack_digest.hpp"
#include "launcher/observe/status_monitor.hpp"
#include "launcher/observe/status_watch.hpp"
#include "launcher/output/console.hpp"
#include "launcher/output/console_output.hpp"
#include "launcher/output/run_logs.hpp"

namespace ddprun::launcher {
namespace {

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

HangWatch::HangWatch(HangWatchSettings settings, const AttemptView& attempt, const RunLogs& logs,
                     EventRecorder& events, StatusWatch& status, NodeStacks& stacks, BoardLink& board,
                     Callbacks callbacks)
    : settings_(std::move(settings)),
      attempt_(attempt),
      logs_(logs),
      events_(events),
      status_(status),
      stacks_(stacks),
      board_(board),
      callbacks_(std::move(callbacks)) {}

HangWatch::~HangWatch() = default;

void HangWatch::on_sample(const NodeStatus& node) {
  const double timeout = settings_.timeout_s;
  if (timeout <= 0) return;
  if (!rule_) rule_ = std::make_unique<HangRule>(HangRuleSettings{timeout});
  const HangVerdict verdict = rule_->observe(node);
  if (!verdict.newly_hung) return;
  sample_ = std::make_unique<NodeStatus>(node);
  time_ = std::chrono::system_clock::now();
  if (StatusMonitor* monitor = status_.monitor()) monitor->count_hang();  // every later sample carries the count
  events_.record({.kind = JobEventKind::hang_detected,
                  .detail = {{"idle_seconds", verdict.idle_seconds},
                             {"timeout_seconds", timeout},
                             {"action", hang_action_name(settings_.action)}}});
  callbacks_.on_hang(verdict.idle_seconds, timeout);
}

void HangWatch::capture() {
  std::vector<StackTarget> targets;
  if (sample_) targets = stacks_.targets(*sample_);
  stacks_dir_ = logs_.run_dir() / ("attempt_" + std::to_string(attempt_.attempt)) / "stacks";
  digest_.clear();
  // A capture under way (an earlier hang's, someone's request) gives way: this one is newer.
  stacks_.queue().for_hang(
      std::move(targets), [this](const std::vector<CapturedRank>& ranks) { print_digest(ranks); },
      [this](const std::vector<CapturedRank>& ranks) {
        write_stack_files(ranks);
        std::vector<RankStacks> own;
        for (const CapturedRank& rank : ranks) own.push_back(rank.stacks);
        // Multi-node: the whole job's digest. Node 0 gathers it for every hang while the job goes
        // on; when the hang stops or restarts the job, every node gathers it before it acts, so
        // that whichever node acts first (and ends the round for the others) has it in its summary.
        const bool acts = settings_.action != HangAction::report;
        if (!acts && attempt_.group_rank != 0) return callbacks_.on_captured();
        auto job_digest = [this, acts](std::optional<StacksReply> reply) {
          if (reply && !reply->error.empty()) {
            print_line("hang: " + terminal_safe(reply->error));
          } else if (reply) {
            print_line("hang: the whole job (" + std::to_string(board_.nodes()) + " nodes):");
            for (const std::string& line : reply->digest) print_line("hang:   " + terminal_safe(line));
            digest_ = reply->digest;  // the failure summary shows the whole job's
          }
          if (acts) callbacks_.on_captured();
        };
        const bool gathering = board_.gather_hang_stacks(std::move(own), job_digest);
        if (!acts || !gathering) callbacks_.on_captured();
      });
}

void HangWatch::print_digest(const std::vector<CapturedRank>& ranks) {
  std::vector<RankStacks> stacks;
  for (const CapturedRank& rank : ranks) stacks.push_back(rank.stacks);
  digest_ = stack_digest(stacks, read_source_line);
  for (const std::string& line : digest_) print_line("hang: " + terminal_safe(line));
  print_line("hang: every rank's stacks: " + (stacks_dir_ / "rank_<rank>.txt").string());
}

void HangWatch::write_stack_files(const std::vector<CapturedRank>& ranks) {
  std::error_code error;
  std::filesystem::create_directories(stacks_dir_, error);
  if (error) return print_line("warning: cannot make " + stacks_dir_.string() + ": " + error.message());
  const double now = unix_now();
  for (const CapturedRank& rank : ranks) {
    const std::filesystem::path file = stacks_dir_ / ("rank_" + std::to_string(rank.stacks.rank) + ".txt");
    const std::string failed = write_file(file, stack_file_text(rank, settings_.host, now));
    if (!failed.empty()) {
      print_line("warning: cannot write " + file.string() + ": " + failed);
      continue;
    }
    events_.record({.kind = JobEventKind::stacks_written,
                    .rank = rank.stacks.rank,
                    .pid = rank.stacks.pid,
                    .detail = {{"file", file.string()}}});
  }
}

void HangWatch::fill(HangReport& report) const {
  report.time = time_;
  report.host = settings_.host;
  report.stacks = (stacks_dir_ / "rank_<rank>.txt").string();
  report.digest = digest_;
}

}  // namespace ddprun::launcher

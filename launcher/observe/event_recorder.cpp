#include "launcher/observe/event_recorder.hpp"

#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cmath>
#include <utility>

#include "launcher/base/signal_names.hpp"
#include "launcher/observe/event_log.hpp"

namespace ddprun::launcher {
namespace {

double unix_seconds_now() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(since_epoch).count()) / 1e6;
}

bool about_another_node(JobEventKind kind) {
  return kind == JobEventKind::node_joined || kind == JobEventKind::node_lost;
}

nlohmann::json describe_node(const rendezvous::NodeInfo& node) {
  return {{"node", node.id}, {"host", node.host_name}, {"addr", node.addr}, {"nproc", node.nproc}};
}

/// The hang_detected recorded since the last attempt's workers started, if any: what a restart
/// without a failure follows (--hang-action restart).
const JobEvent* hang_of_the_last_attempt(const RecentEvents& recent) {
  const auto& events = recent.events();
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (it->kind == JobEventKind::hang_detected) return &*it;
    if (it->kind == JobEventKind::worker_started) return nullptr;
  }
  return nullptr;
}

}  // namespace

EventRecorder::EventRecorder(boost::asio::io_context& io, JobFacts facts, const AttemptView& attempt, Warn warn)
    : io_(io), facts_(std::move(facts)), attempt_(attempt), warn_(std::move(warn)) {}

EventRecorder::~EventRecorder() = default;

void EventRecorder::open_log(const std::string& file) {
  if (file.empty()) return;
  log_ = std::make_unique<EventLog>(io_, file, warn_);
  add_sink(log_.get());
}

void EventRecorder::record(JobEvent event) {
  if (event.time == 0) event.time = unix_seconds_now();
  if (event.node_rank < 0 && !about_another_node(event.kind)) event.node_rank = node_rank_;
  recent_.record(event);
  for (JobEventSink* sink : sinks_) sink->record(event);
}

void EventRecorder::add_sink(JobEventSink* sink) { sinks_.push_back(sink); }

void EventRecorder::job_started() {
  if (facts_.multi_node) node_rank_ = facts_.static_node_rank.value_or(-1);  // a dynamic job: until a round says
  record({.kind = JobEventKind::job_started,
          .detail = {{"run_id", facts_.run_id},
                     {"host", facts_.host},
                     {"agent_pid", static_cast<int>(::getpid())},
                     {"nproc", facts_.nproc_per_node},
                     {"nnodes", std::to_string(facts_.min_nodes) + ":" + std::to_string(facts_.max_nodes)},
                     {"max_restarts", facts_.max_restarts},
                     {"command", facts_.command}}});
}

void EventRecorder::job_finished(int exit_status, int restarts) {
  // host and agent_pid as job_started has them: a reader pairs the two by agent (a dynamic job's
  // node rank is only known after it started).
  record({.kind = JobEventKind::job_finished,
          .detail = {{"exit_status", exit_status},
                     {"restarts", restarts},
                     {"host", facts_.host},
                     {"agent_pid", static_cast<int>(::getpid())}}});
}

void EventRecorder::group_starting(std::optional<std::pair<int, int>> first_failure) {
  if (!std::exchange(started_a_group_, true)) return;
  JobEvent restart{.kind = JobEventKind::restart, .detail = {{"restart_count", attempt_.restarts}}};
  if (facts_.multi_node) {
    restart.detail["round"] = attempt_.attempt;
    restart.detail["reason"] = restart_reason_;
  } else if (first_failure) {
    restart.detail["reason"] = "rank " + std::to_string(first_failure->first) + " failed (" +
                               describe_exitcode(first_failure->second) + ")";
  } else if (const JobEvent* hang = hang_of_the_last_attempt(recent_)) {
    restart.detail["reason"] = "hang: no rank made progress for " +
                               std::to_string(std::lround(hang->detail.value("idle_seconds", 0.0))) +
                               " s (--hang-action restart)";
  }
  record(std::move(restart));
}

void EventRecorder::worker_started(int local_rank, pid_t pid, bool warm) {
  record({.kind = JobEventKind::worker_started,
          .rank = attempt_.rank_base + local_rank,
          .pid = pid,
          .detail = {{"local_rank", local_rank}, {"attempt", attempt_.attempt}, {"warm", warm}}});
}

void EventRecorder::worker_exited(const WorkerEnd& end) {
  JobEvent exited{.kind = JobEventKind::worker_exited,
                  .rank = attempt_.rank_base + end.local_rank,
                  .pid = end.pid,
                  .detail = {{"local_rank", end.local_rank},
                             {"attempt", attempt_.attempt},
                             {"exitcode", end.exitcode},
                             {"description", describe_exitcode(end.exitcode)},
                             // Whether this exit is a failure of its own, or the end ddprun gave it.
                             {"failed", end.failed}}};
  if (end.stop_signal_sent != 0) exited.detail["stop_signal_sent"] = end.stop_signal_sent;
  record(std::move(exited));
}

void EventRecorder::round_formed(const rendezvous::RoundDecision& decision) {
  node_rank_ = attempt_.group_rank;
  record({.kind = JobEventKind::round_formed,
          .detail = {{"round", decision.round},
                     {"nodes", attempt_.group_world_size},
                     {"world_size", attempt_.world_size},
                     {"restart_count", decision.restart_count},
                     {"group_rank", attempt_.group_rank}}});
  auto in_round = [](const rendezvous::RoundDecision& round, const std::string& id) {
    return round.group_rank_of(id) >= 0;
  };
  if (last_round_) {
    for (std::size_t rank = 0; rank < last_round_->nodes.size(); ++rank) {
      const rendezvous::NodeInfo& node = last_round_->nodes[rank];
      if (in_round(decision, node.id)) continue;
      if (std::find(nodes_said_lost_.begin(), nodes_said_lost_.end(), node.id) != nodes_said_lost_.end()) continue;
      JobEvent lost{.kind = JobEventKind::node_lost, .node_rank = static_cast<int>(rank), .detail = describe_node(node)};
      lost.detail["reason"] = "not in round " + std::to_string(decision.round);
      record(std::move(lost));
    }
  }
  for (std::size_t rank = 0; rank < decision.nodes.size(); ++rank) {
    const rendezvous::NodeInfo& node = decision.nodes[rank];
    if (last_round_ && in_round(*last_round_, node.id)) continue;
    JobEvent joined{.kind = JobEventKind::node_joined, .node_rank = static_cast<int>(rank), .detail = describe_node(node)};
    joined.detail["round"] = decision.round;
    record(std::move(joined));
  }
  last_round_ = decision;
  nodes_said_lost_.clear();
}

void EventRecorder::round_ended(const rendezvous::RoundEnd& end, const std::string& self) {
  using rendezvous::EndKind;
  restart_reason_ = end.message;
  if (end.kind != EndKind::lost && end.kind != EndKind::left) return;
  // This node's own leaving is its job_finished; and a round's end it wrote itself comes back to it.
  if (!last_round_ || end.node == self) return;
  const int rank = last_round_->group_rank_of(end.node);
  if (rank < 0) return;
  if (std::find(nodes_said_lost_.begin(), nodes_said_lost_.end(), end.node) != nodes_said_lost_.end()) return;
  nodes_said_lost_.push_back(end.node);
  JobEvent lost{.kind = JobEventKind::node_lost,
                .node_rank = rank,
                .detail = describe_node(last_round_->nodes[static_cast<std::size_t>(rank)])};
  lost.detail["reason"] = end.message;
  lost.detail["how"] = std::string(rendezvous::end_kind_name(end.kind));
  record(std::move(lost));
}

void EventRecorder::when_drained(std::function<void()> done, std::chrono::milliseconds patience) {
  if (!log_) return done();
  log_->when_drained(std::move(done), patience);
}

}  // namespace ddprun::launcher

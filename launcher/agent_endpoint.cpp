// The Agent's status endpoint: the StatusSource it serves (this node's latest status sample, the
// recent events, stacks captured on demand), the owner-only Unix socket in the run's folder that
// `ddprun status` reads, the run's registry entry, and --status-port's TCP endpoint.
//
// Sampling costs nothing until someone asks: without --status-port (and without another reader of
// the samples) the status monitor is made at the first request, and samples once a second from
// then on, so that a job nobody looks at polls nothing.
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <chrono>

#include "launcher/agent.hpp"
#include "launcher/agent_support.hpp"
#include "launcher/observe/capture_queue.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/observe/stack_capture.hpp"
#include "launcher/observe/stack_digest.hpp"
#include "launcher/observe/status_endpoint.hpp"
#include "launcher/observe/status_monitor.hpp"
#include "launcher/workers/worker_group.hpp"
#include "rendezvous/endpoint.hpp"

namespace ddprun::launcher {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// The program and its arguments, for the list of runs (at most 200 bytes).
std::string command_line(const LaunchConfig& config) {
  std::string text = config.program;
  for (const auto& arg : config.program_args) text += " " + arg;
  if (text.size() > 200) text = text.substr(0, 197) + "...";
  return text;
}

}  // namespace

/// What the endpoint reads of the agent. On the loop, like the agent.
class Agent::EndpointView : public StatusSource {
 public:
  explicit EndpointView(Agent& agent) : a_(agent) {}

  JobStatus status() override {
    a_.ensure_status_samples();
    JobStatus job;
    job.run_id = a_.plan_.config.rdzv_id;
    job.world_size = a_.world_size_;
    job.nodes.push_back(a_.monitor_->latest());
    a_.add_board_nodes(job);  // a multi-node job: the other nodes', from the board (agent_board.cpp)
    return job;
  }

  std::vector<JobEvent> recent_events() override {
    const auto& events = a_.recent_events_.events();
    return {events.begin(), events.end()};
  }

  void capture_stacks(std::function<void(StacksReply)> done) override {
    if (a_.board_) return a_.board_stacks(std::move(done));  // every node's (agent_board.cpp)
    a_.ensure_status_samples();
    // A capture under way (a hang's, another request's) answers this one too (capture_queue.hpp).
    a_.captures().on_demand(a_.stack_targets(a_.monitor_->latest()),
                            [done = std::move(done)](const std::vector<CapturedRank>& ranks) {
                              StacksReply reply;
                              for (const CapturedRank& rank : ranks) reply.ranks.push_back(rank.stacks);
                              reply.digest = stack_digest(reply.ranks, read_source_line);
                              done(reply);
                            });
  }

 private:
  Agent& a_;
};

void Agent::ensure_status_samples() {
  if (monitor_) {
    // Before the first sample (a second after the workers start), or when the samples have
    // stopped coming, a reader asking now gets one taken now.
    const double sampled_at = monitor_->latest().sampled_at;
    if (group_ && (sampled_at == 0 || unix_now() - sampled_at > 2)) monitor_->sample_now();
    return;
  }
  make_status_monitor(StatusMonitorSettings{});  // once a second
  if (group_) status_attempt_started();
  monitor_->sample_now();
}

void Agent::start_status_endpoint() {
  const LaunchConfig& config = plan_.config;
  endpoint_ = std::make_unique<StatusEndpoint>();
  endpoint_->view = std::make_unique<EndpointView>(*this);
  endpoint_->server = std::make_unique<StatusHttpServer>(io_, *endpoint_->view, config.store_token);
  RunEntry entry;
  if (config.status_port) {
    // A port that cannot be had fails the job before anything runs, as a busy store port does.
    const int port = endpoint_->server->listen_tcp(config.status_host, *config.status_port);
    entry.url = "http://" + rendezvous::format_endpoint(config.status_host, port) + "/";
    print_line("status at " + entry.url);
  }
  // The Unix socket and the registry are conveniences: without them the job still runs.
  try {
    const std::filesystem::path registry = open_registry_folder(plan_.env);
    entry.socket = status_socket_path(logs_->run_dir(), registry, ::getpid());
    endpoint_->server->listen_unix(entry.socket);
    entry.run_id = config.rdzv_id;
    entry.pid = ::getpid();
    entry.start_ticks = process_start_ticks(entry.pid).value_or(0);
    entry.host = plan_.hostname;
    entry.run_dir = logs_->run_dir().string();
    entry.started_at = unix_now();
    entry.command = command_line(config);
    endpoint_->registration = std::make_unique<RunRegistration>(registry, entry);
  } catch (const LaunchError& error) {
    print_line(std::string("warning: ddprun status cannot find this job: ") + error.what());
  }
}

}  // namespace ddprun::launcher

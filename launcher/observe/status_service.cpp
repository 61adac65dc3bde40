#include "launcher/observe/status_service.hpp"

#include <unistd.h>

#include <boost/asio/ip/address.hpp>
#include <chrono>

#include "launcher/base/unix_time.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/observe/board_link.hpp"
#include "launcher/observe/event_recorder.hpp"
#include "launcher/observe/node_stacks.hpp"
#include "launcher/observe/stack_capture.hpp"
#include "launcher/observe/stack_digest.hpp"
#include "launcher/observe/status_watch.hpp"
#include "launcher/output/console_output.hpp"
#include "launcher/output/run_logs.hpp"
#include "rendezvous/endpoint.hpp"

namespace ddprun::launcher {

std::string status_url(std::string_view status_host, int port, std::string_view host_name) {
  std::string host(rendezvous::without_brackets(status_host));
  boost::system::error_code not_an_address;
  const auto address = boost::asio::ip::make_address(host, not_an_address);
  if (!not_an_address && address.is_unspecified()) {
    host = !host_name.empty() ? std::string(host_name) : address.is_v6() ? "::1" : "127.0.0.1";
  }
  return "http://" + rendezvous::format_endpoint(host, port) + "/";
}

std::string run_command_line(const std::string& program, const std::vector<std::string>& args) {
  std::string text = program;
  for (const auto& arg : args) text += " " + arg;
  if (text.size() > 200) text = text.substr(0, 197) + "...";
  return text;
}

StatusService::StatusService(boost::asio::io_context& io, StatusServiceSettings settings, const Environ& env,
                             const RunLogs& logs, const AttemptView& attempt, StatusWatch& status,
                             EventRecorder& events, NodeStacks& stacks, BoardLink& board)
    : io_(io),
      settings_(std::move(settings)),
      env_(env),
      logs_(logs),
      attempt_(attempt),
      status_(status),
      events_(events),
      stacks_(stacks),
      board_(board) {}

StatusService::~StatusService() {
  registration_.reset();
  server_.reset();
}

void StatusService::start() {
  StatusSource& source = *this;  // the base is private: the server alone reads the job through it
  server_ = std::make_unique<StatusHttpServer>(io_, source, settings_.token);
  RunEntry entry;
  if (settings_.status_port) {
    // A port that cannot be had fails the job before anything runs, as a busy store port does.
    const int port = server_->listen_tcp(settings_.status_host, *settings_.status_port);
    entry.url = status_url(settings_.status_host, port, settings_.host);
    print_line("status at " + entry.url);
  }
  // The Unix socket and the registry are conveniences: without them the job still runs.
  try {
    const std::filesystem::path registry = open_registry_folder(env_);
    entry.socket = status_socket_path(logs_.run_dir(), registry, ::getpid());
    server_->listen_unix(entry.socket);
    entry.run_id = settings_.run_id;
    entry.pid = ::getpid();
    entry.start_ticks = process_start_ticks(entry.pid).value_or(0);
    entry.host = settings_.host;
    entry.run_dir = logs_.run_dir().string();
    entry.started_at = unix_now();
    entry.command = settings_.command;
    registration_ = std::make_unique<RunRegistration>(registry, entry);
  } catch (const LaunchError& error) {
    print_line(std::string("warning: ddprun status cannot find this job: ") + error.what());
  }
}

JobStatus StatusService::status() {
  status_.ensure_samples();
  JobStatus job;
  job.run_id = settings_.run_id;
  job.world_size = attempt_.world_size;
  job.nodes.push_back(status_.latest());
  board_.add_nodes(job);  // a multi-node job: the other nodes', from the board
  return job;
}

std::vector<JobEvent> StatusService::recent_events() {
  const auto& events = events_.recent().events();
  return {events.begin(), events.end()};
}

void StatusService::capture_stacks(std::function<void(StacksReply)> done) {
  if (board_.is_open()) return board_.stacks(std::move(done));  // every node's
  status_.ensure_samples();
  // A capture under way (a hang's, another request's) answers this one too (capture_queue.hpp).
  stacks_.capture(status_.latest(), [done = std::move(done)](std::vector<RankStacks> ranks) {
    StacksReply reply;
    reply.ranks = std::move(ranks);
    reply.digest = stack_digest(reply.ranks, read_source_line);
    done(reply);
  });
}

}  // namespace ddprun::launcher

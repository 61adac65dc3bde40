/// The multi-node half of the Agent: rendezvous rounds. Every store exchange runs on
/// NodeMembership's threads; what comes back (a round formed, a round ended, the rendezvous failed)
/// is one more event of the agent's loop, like a child's exit.
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <random>

#include "launcher/agent.hpp"
#include "launcher/agent_support.hpp"
#include "launcher/errors.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/job_shape.hpp"
#include "rendezvous/join_progress.hpp"
#include "rendezvous/open_file_limit.hpp"
#include "rendezvous/round_keys.hpp"
#include "rendezvous/store_error.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ddprun::launcher {
namespace {

using namespace ddprun::rendezvous;

constexpr int kDefaultC10dPort = 29400;

/// Unique per agent process, readable in the store: "<host>-<pid>-<6 hex digits>".
std::string new_node_id(const std::string& hostname) {
  std::random_device device;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%06x", static_cast<unsigned>(device()) & 0xffffffU);
  return hostname + "-" + std::to_string(::getpid()) + "-" + suffix;
}

/// Rendezvous keys live under this, in the same store as the workers' keys when they share it.
constexpr const char* kRendezvousKeys = "ddprun/";

/// Static jobs with --worker-store agent (the default): workers use node 0's store on --master-port,
/// as torchrun's do, rather than a fresh store (and port) each round. c10d keeps a fresh store per
/// round, as torchrun does (its workers of a c10d job do not use the agent's store either).
bool workers_use_agent_store(const LaunchConfig& config) {
  return config.rdzv_backend == "static" && config.worker_store == WorkerStore::agent;
}

RendezvousSettings settings_of(const LaunchConfig& config) {
  RendezvousSettings settings;
  settings.run_id = config.rdzv_id;
  settings.is_static = config.rdzv_backend == "static";
  settings.min_nodes = config.min_nodes;
  settings.max_nodes = config.max_nodes;
  settings.max_restarts = config.max_restarts;
  if (settings.is_static) settings.static_rank = config.node_rank;
  settings.agent_worker_store = workers_use_agent_store(config);
  try {
    apply_rendezvous_conf(settings, config.rdzv_conf);
  } catch (const std::invalid_argument& error) {
    throw UsageError(error.what());
  }
  return settings;
}

/// Where the job's rendezvous store listens: node 0 (static) or the endpoint (c10d).
Endpoint store_endpoint_of(const LaunchConfig& config) {
  if (config.rdzv_backend == "static") return Endpoint{config.master_addr, config.master_port};
  if (config.rdzv_endpoint.empty()) {
    throw UsageError("--rdzv-backend=c10d needs --rdzv-endpoint HOST[:PORT] (the machine that hosts the store)");
  }
  return parse_endpoint(config.rdzv_endpoint, kDefaultC10dPort);
}

std::string describe_end_here(const RoundEnd& end) {
  switch (end.kind) {
    case EndKind::failure: return end.message + "; restarting the workers on every node";
    case EndKind::lost:
    case EndKind::left:
    case EndKind::joined: return end.message + "; stopping the workers to form a new round";
    default: return end.message;
  }
}

}  // namespace

void Agent::start_rendezvous() {
  const LaunchConfig& config = plan_.config;
  RendezvousSettings settings = settings_of(config);
  Endpoint store = store_endpoint_of(config);

  std::string advertised = config.local_addr;
  if (advertised.empty()) {
    try {
      advertised = local_address_toward(store.host, store.port);
    } catch (const std::exception& error) {
      throw LaunchError("cannot find this node's address towards the rendezvous store " +
                        format_endpoint(store.host, store.port) + " (" + error.what() + "); set --local-addr");
    }
  }
  bind_host_ = wildcard_address_for(advertised);

  std::optional<std::string> token;
  try {
    token = auth::token_from_environment([this](const char* name) { return lookup(plan_.env, name); });
  } catch (const StoreError& error) {
    throw UsageError(error.what());
  }
  store_token_ = token;
  close_timeout_ = settings.close_timeout;
  raise_open_file_limit();

  NodeInfo self;
  self.id = new_node_id(plan_.hostname);
  self.host_name = plan_.hostname;
  self.addr = advertised;
  self.nproc = config.nproc_per_node;
  self.static_rank = settings.static_rank;

  // The store host: node 0 (static); with c10d, is_host, else the machine the endpoint names. Of
  // several agents on that machine, the first to bind the port hosts it, the others are clients.
  const bool hosts = settings.is_static ? config.node_rank == 0 : settings.is_host.value_or(is_this_machine(store.host));
  if (hosts) {
    try {
      PortReservation reservation(io_, wildcard_address_for(store.host), store.port);
      StoreServerOptions options;
      options.host = wildcard_address_for(store.host);
      options.port = reservation.port();
      options.token = token;
      // There before anyone can connect: a node of another job is told at its first look.
      options.initial_keys[kHostedRunIdKey] = settings.run_id;
      // So is the job's shape, as the host was started: in a static job node 0 fixes it, whoever
      // connects first.
      options.initial_keys[RoundKeys(settings.run_id).job_shape()] = encode_job_shape(job_shape_of(settings, self));
      store_ = std::make_unique<StoreServer>(options, reservation.take_socket());
      store_->start();
      if (store.port == 0) store.port = reservation.port();
    } catch (const LaunchError&) {
      if (settings.is_static || settings.is_host) throw;
      // Another agent on this machine hosts it: this one is a client like any other node.
    }
  }

  probe_acceptor_.emplace(io_, tcp::endpoint(asio::ip::make_address(bind_host_), 0));
  accept_probes();

  self.probe_port = probe_acceptor_->local_endpoint().port();

  NodeMembership::Events events;
  events.on_round = [this](const RoundDecision& decision) { on_round(decision); };
  events.on_round_end = [this](int round, const RoundEnd& end) { on_round_end(round, end); };
  events.on_error = [this](const std::string& message, bool told_to_every_node) {
    // The others read the same error from our store (if we host it): it stays up until they have.
    if (told_to_every_node) linger_store_ = true;
    on_rendezvous_error(message);
  };
  events.on_warning = [](const std::string& line) { print_line("warning: " + line); };
  events.on_waiting = [](const std::string& line) { print_line(line); };
  membership_ = std::make_unique<NodeMembership>(io_, settings, store, token, self, std::move(events));
}

void Agent::accept_probes() {
  probe_acceptor_->async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    // Any error ends accepting (never a busy loop on EMFILE): the kernel still completes probes'
    // handshakes into the backlog, which is all a probe needs.
    if (ec) return;
    boost::system::error_code ignored;
    socket.close(ignored);  // being there was the answer
    accept_probes();
  });
}

void Agent::begin_join() {
  phase_ = Phase::joining;
  if (workers_use_agent_store(plan_.config)) {
    // No store of the round's own: node 0's agent store serves the workers (store_port unused).
    return membership_->join(0, previous_rank_);
  }
  // Held open from the join until the round forms: if this node becomes group rank 0, the workers'
  // store serves on it, and nobody could take the port in between.
  next_worker_store_.emplace(io_, bind_host_, 0);
  membership_->join(next_worker_store_->port(), previous_rank_);
}

void Agent::on_round(const RoundDecision& decision) {
  if (phase_ != Phase::joining) return;  // stopping for a signal: the round goes on without us
  round_ = decision;
  round_end_.reset();
  group_rank_ = decision.group_rank_of(membership_->self().id);
  group_world_size_ = static_cast<int>(decision.nodes.size());
  rank_base_ = decision.rank_base(group_rank_);
  world_size_ = decision.world_size();
  restart_count_ = decision.restart_count;
  attempt_ = decision.round;
  const NodeInfo& node0 = decision.nodes.front();
  master_addr_ = node0.addr;
  master_port_number_ = node0.store_port;
  attempt_is_round_ = workers_use_agent_store(plan_.config);
  if (attempt_is_round_) {
    // torchrun's static job: MASTER_ADDR:MASTER_PORT = --master-addr:--master-port, the agent store.
    // PyTorch's env:// puts each attempt's keys under "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>"
    // (ddprun::runtime does too): the round, not the restart count, numbers the attempt, since a
    // round after a lost or replaced node uses no restart and must not see the old round's keys.
    master_addr_ = plan_.config.master_addr;
    master_port_number_ = plan_.config.master_port;
  } else if (group_rank_ == 0) {
    StoreServerOptions options;
    options.host = bind_host_;
    options.port = next_worker_store_->port();
    options.token = store_token_;
    worker_store_ = std::make_unique<StoreServer>(options, next_worker_store_->take_socket());
    worker_store_->start();
  }
  next_worker_store_.reset();
  membership_->watch(decision);
  print_line("round " + std::to_string(decision.round) + ": " + std::to_string(group_world_size_) +
             " node(s), world size " + std::to_string(world_size_) + "; this node is group rank " +
             std::to_string(group_rank_) + " with ranks " + std::to_string(rank_base_) + "-" +
             std::to_string(rank_base_ + plan_.config.nproc_per_node - 1) +
             (restart_count_ > 0 ? ", restart " + std::to_string(restart_count_) : std::string()));
  if (plan_.config.verbose) {
    print_line(describe_round_result(decision.round, group_world_size_, group_rank_, world_size_,
                                     format_endpoint(master_addr_, master_port_number_)));
  }
  start_attempt();
}

void Agent::on_round_end(int round, const RoundEnd& end) {
  if (!round_ || round != round_->round || round_end_) return;
  round_end_ = end;
  if (!ends_the_job(end.kind)) print_line(describe_end_here(end));
  if (phase_ == Phase::running) {
    phase_ = Phase::stopping_for_round_end;
    group_->stop(SIGTERM, grace_of(plan_.config));
  } else if (!group_ && phase_ != Phase::stopping_for_signal) {
    after_round();
  }
}

void Agent::report_local_failure() {
  const WorkerFailure& first = failures_.front();
  const bool restart = restart_count_ < plan_.config.max_restarts;
  std::string message = "rank " + std::to_string(first.rank) + " failed on node " + membership_->self().describe() +
                        " (" + describe_exitcode(first.exitcode) + ")";
  if (restart) {
    message += ", restart " + std::to_string(restart_count_ + 1) + " of " + std::to_string(plan_.config.max_restarts);
  }
  membership_->report_failure(RoundEnd{restart ? EndKind::failure : EndKind::fatal, membership_->self().id, message});
}

void Agent::on_rendezvous_error(const std::string& message) {
  if (!rendezvous_error_.empty()) return;
  rendezvous_error_ = message;
  if (group_) {
    if (phase_ != Phase::stopping_for_signal) {
      phase_ = Phase::stopping_after_failure;
      group_->stop(SIGTERM, grace_of(plan_.config));
    }
    return;
  }
  print_line("rendezvous: " + message);
  finish(kExitJobFailed);
}

void Agent::on_group_done_in_round() {
  if (phase_ == Phase::stopping_for_signal) {
    print_line("received " + signal_name(stop_signal_) + ", workers stopped");
    return leave(RoundEnd{EndKind::left, membership_->self().id,
                          "node " + membership_->self().describe() + " left (" + signal_name(stop_signal_) + ")"},
                 exit_status_for_signal(stop_signal_));
  }
  if (!rendezvous_error_.empty()) {
    print_line("rendezvous: " + rendezvous_error_);
    return finish(kExitJobFailed);
  }
  if (!fatal_error_.empty()) {  // the workers could not be started here: nowhere else can the job go on
    print_line(fatal_error_);
    return leave(RoundEnd{EndKind::fatal, membership_->self().id,
                          "node " + membership_->self().describe() + " could not start its workers: " + fatal_error_},
                 kExitJobFailed);
  }
  if (phase_ == Phase::running) {  // every worker here succeeded: wait for the other nodes
    phase_ = Phase::waiting_for_others;
    membership_->mark_finished();
  }
  if (round_end_) after_round();
  // Else the round's end (this node's failure report, or another node's) is on its way.
}

void Agent::after_round() {
  const RoundEnd end = *round_end_;
  linger_store_ = ends_the_job(end.kind);
  if (end.kind == EndKind::finished) return finish(kExitSuccess);
  if (end.kind == EndKind::fatal) {
    if (end.node == membership_->self().id && !failures_.empty()) {
      write_stderr(format_failure_summary(plan_.config.program, failures_));
    } else {
      print_line("the job failed: " + end.message);
    }
    return finish(kExitJobFailed);
  }
  // A new round: workers restart (failure) or the membership changed (lost, left, joined).
  if (worker_store_) {
    worker_store_->stop();
    worker_store_.reset();
  }
  // The workers' keys of the ended attempt: the next one has its own prefix and never reads them,
  // but a job of many rounds should not keep every round's. This node's workers are gone, and no
  // worker of the next round can start before this node joins it (a static round needs every node).
  if (store_ && workers_use_agent_store(plan_.config)) store_->erase_all_but(kRendezvousKeys);
  previous_rank_ = group_rank_;
  round_.reset();
  round_end_.reset();
  begin_join();
}

void Agent::leave(RoundEnd end, int exit_status) {
  if (!round_ || round_end_) return finish(exit_status);
  close_timer_.emplace(io_, close_timeout_);
  close_timer_->async_wait([this, exit_status](const boost::system::error_code& ec) {
    if (!ec) finish(exit_status);
  });
  membership_->end_round(std::move(end), [this, exit_status] { finish(exit_status); });
}

}  // namespace ddprun::launcher

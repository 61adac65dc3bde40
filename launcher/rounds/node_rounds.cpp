#include "launcher/rounds/node_rounds.hpp"

#include <unistd.h>

#include <cstdio>
#include <random>
#include <utility>

#include "launcher/base/errors.hpp"
#include "rendezvous/error.hpp"
#include "rendezvous/etcd/etcd_store.hpp"
#include "rendezvous/job_shape.hpp"
#include "rendezvous/join_progress.hpp"
#include "rendezvous/node_membership.hpp"
#include "rendezvous/open_file_limit.hpp"
#include "rendezvous/round_keys.hpp"
#include "rendezvous/store_server.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ddprun::launcher {
namespace {

using namespace ddprun::rendezvous;

/// Unique per agent process, readable in the store: "<host>-<pid>-<6 hex digits>".
std::string new_node_id(const std::string& hostname) {
  std::random_device device;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%06x", static_cast<unsigned>(device()) & 0xffffffU);
  return hostname + "-" + std::to_string(::getpid()) + "-" + suffix;
}

}  // namespace

std::vector<std::string> describe_round_entry(const RoundDecision& decision, const RoundPlace& place, int nproc_per_node,
                                              bool verbose) {
  const AttemptView& view = place.view;
  const int restart_count = decision.restart_count;
  std::vector<std::string> lines;
  lines.push_back("round " + std::to_string(decision.round) + ": " + std::to_string(view.group_world_size) +
                  " node(s), world size " + std::to_string(view.world_size) + "; this node is group rank " +
                  std::to_string(view.group_rank) + " with ranks " + std::to_string(view.rank_base) + "-" +
                  std::to_string(view.rank_base + nproc_per_node - 1) +
                  (restart_count > 0 ? ", restart " + std::to_string(restart_count) : std::string()));
  if (verbose) {
    lines.push_back(describe_round_result(decision.round, view.group_world_size, view.group_rank, view.world_size,
                                          format_endpoint(place.master.host, place.master.port)));
  }
  return lines;
}

NodeRounds::NodeRounds(asio::io_context& io, const LaunchConfig& config, std::string hostname, RoundHandlers handlers)
    : io_(io), config_(config), hostname_(std::move(hostname)), handlers_(std::move(handlers)) {}

NodeRounds::~NodeRounds() = default;

RoundsStarted NodeRounds::start() {
  const LaunchConfig& config = config_;
  RendezvousSettings settings = config.rendezvous;
  Endpoint store = config.store_endpoint;
  RoundsStarted started;

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

  const std::optional<std::string>& token = config.store_token;
  close_timeout_ = settings.close_timeout;
  raise_open_file_limit();

  NodeInfo self;
  self.id = new_node_id(hostname_);
  self.host_name = hostname_;
  self.addr = advertised;
  self.nproc = config.topology.nproc_per_node;
  self.static_rank = settings.static_rank;

  // The store host: node 0 (static); with c10d, is_host, else the machine the endpoint names. Of
  // several agents on that machine, the first to bind the port hosts it, the others are clients.
  // etcd-v3: the etcd cluster is the store; no agent hosts one.
  const bool hosts = config.etcd ? false
                     : settings.is_static ? config.topology.node_rank == 0
                                          : settings.is_host.value_or(is_this_machine(store.host));
  std::optional<PortReservation> reservation;
  if (hosts) {
    try {
      reservation.emplace(io_, wildcard_address_for(store.host), store.port);
    } catch (const LaunchError&) {
      if (settings.is_static || settings.is_host) throw;
      // Another agent on this machine hosts it: this one is a client like any other node.
    }
  }
  if (reservation) {
    StoreServerOptions options;
    options.host = wildcard_address_for(store.host);
    options.port = reservation->port();
    options.token = token;
    // There before anyone can connect: a node of another job is told at its first look.
    options.initial_keys[kHostedRunIdKey] = settings.run_id;
    // So is the job's shape, as the host was started: in a static job node 0 fixes it, whoever
    // connects first.
    options.initial_keys[RoundKeys(settings.run_id).job_shape()] = encode_job_shape(job_shape_of(settings, self));
    try {
      started.hosted_store = std::make_unique<StoreServer>(options, reservation->take_socket());
    } catch (const rendezvous::Error& error) {
      throw LaunchError("cannot serve the rendezvous store on " + format_endpoint(options.host, options.port) + ": " +
                        error.what());
    }
    started.hosted_store->start();
    if (store.port == 0) store.port = reservation->port();
  }

  probe_acceptor_.emplace(io_, tcp::endpoint(asio::ip::make_address(bind_host_), 0));
  accept_probes();

  self.probe_port = probe_acceptor_->local_endpoint().port();

  NodeMembership::Events events;
  events.on_round = [this](const RoundDecision& decision) { handlers_.on_round(decision); };
  events.on_round_end = [this](int round, const RoundEnd& end) { handlers_.on_round_end(round, end); };
  events.on_error = [this](const std::string& message, bool told_to_every_node) {
    handlers_.on_error(message, told_to_every_node);
  };
  events.on_warning = [this](const std::string& line) { handlers_.print("warning: " + line); };
  events.on_waiting = [this](const std::string& line) { handlers_.print(line); };
  started.node_id = self.id;
  started.node_description = self.describe();
  StoreFactory stores = tcp_store_factory(store, token);
  if (config.etcd) {
    try {
      stores = etcd_store_factory(EtcdSession::create(io_.get_executor(), *config.etcd));
    } catch (const rendezvous::Error& error) {
      throw LaunchError(std::string("cannot use the etcd-v3 rendezvous: ") + error.what());
    }
  }
  membership_ = std::make_unique<NodeMembership>(io_, settings, std::move(stores), self, std::move(events));
  return started;
}

void NodeRounds::accept_probes() {
  probe_acceptor_->async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    // Any error ends accepting (never a busy loop on EMFILE): the kernel still completes probes'
    // handshakes into the backlog, which is all a probe needs.
    if (ec) return;
    boost::system::error_code ignored;
    socket.close(ignored);  // being there was the answer
    accept_probes();
  });
}

void NodeRounds::join() {
  if (config_.rendezvous.agent_worker_store) {
    // No store of the round's own: node 0's agent store serves the workers (store_port unused).
    return membership_->join(0, previous_rank_);
  }
  // Held open from the join until the round forms: if this node becomes group rank 0, the workers'
  // store serves on it, and nobody could take the port in between.
  next_worker_store_.emplace(io_, bind_host_, 0);
  membership_->join(next_worker_store_->port(), previous_rank_);
}

bool NodeRounds::attempt_is_round() const { return config_.rendezvous.agent_worker_store; }

RoundPlace NodeRounds::enter(const RoundDecision& decision) {
  RoundPlace place;
  AttemptView& view = place.view;
  view.group_rank = decision.group_rank_of(membership_->self().id);
  view.group_world_size = static_cast<int>(decision.nodes.size());
  view.rank_base = decision.rank_base(view.group_rank);
  view.world_size = decision.world_size();
  view.attempt = decision.round;
  view.restarts = decision.restart_count;
  const NodeInfo& node0 = decision.nodes.front();
  place.master = {node0.addr, node0.store_port};
  if (attempt_is_round()) {
    // torchrun's static job: MASTER_ADDR:MASTER_PORT = --master-addr:--master-port, the agent store.
    // PyTorch's env:// puts each attempt's keys under "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>"
    // (ddprun::runtime does too): the round, not the restart count, numbers the attempt, since a
    // round after a lost or replaced node uses no restart and must not see the old round's keys.
    place.master = {config_.master_addr, config_.master_port};
  } else if (view.group_rank == 0) {
    StoreServerOptions options;
    options.host = bind_host_;
    options.port = next_worker_store_->port();
    options.token = config_.store_token;
    try {
      worker_store_ = std::make_unique<StoreServer>(options, next_worker_store_->take_socket());
    } catch (const rendezvous::Error& error) {
      throw LaunchError("cannot serve the workers' store on " + format_endpoint(bind_host_, options.port) + ": " +
                        error.what());
    }
    worker_store_->start();
  }
  next_worker_store_.reset();
  membership_->watch(decision);
  return place;
}

void NodeRounds::close(int group_rank) {
  if (worker_store_) {
    worker_store_->stop();
    worker_store_.reset();
  }
  previous_rank_ = group_rank;
}

void NodeRounds::stop_worker_store() {
  if (worker_store_) worker_store_->stop();
}

void NodeRounds::leave(RoundEnd end) {
  // Within close_timeout: the others learn it from this node's silence otherwise.
  close_timer_.emplace(io_, close_timeout_);
  close_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (!ec) handlers_.on_left();
  });
  membership_->end_round(std::move(end), [this] { handlers_.on_left(); });
}

void NodeRounds::report_failure(RoundEnd end) { membership_->report_failure(std::move(end)); }

void NodeRounds::mark_finished() { membership_->mark_finished(); }

void NodeRounds::drop_membership() { membership_.reset(); }

}  // namespace ddprun::launcher

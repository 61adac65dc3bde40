/// The multi-node half of the Agent: rendezvous rounds. NodeMembership does the store exchanges;
/// what comes back (a round formed, a round ended, the rendezvous failed) is one more supervisor
/// event, like a child's exit; the round actions (join, enter, close, leave) are performed here.
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <random>

#include "launcher/agent.hpp"
#include "launcher/agent_support.hpp"
#include "launcher/observe/board_link.hpp"
#include "launcher/observe/event_recorder.hpp"
#include "launcher/base/errors.hpp"
#include "rendezvous/node_membership.hpp"
#include "rendezvous/error.hpp"
#include "rendezvous/etcd/etcd_store.hpp"
#include "rendezvous/job_shape.hpp"
#include "rendezvous/join_progress.hpp"
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

/// Rendezvous keys live under this, in the same store as the workers' keys when they share it.
constexpr const char* kRendezvousKeys = "ddprun/";

}  // namespace

void Agent::start_rendezvous() {
  const LaunchConfig& config = plan_.config;
  RendezvousSettings settings = config.rendezvous;
  Endpoint store = config.store_endpoint;

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
  self.id = new_node_id(plan_.hostname);
  self.host_name = plan_.hostname;
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
      store_ = std::make_unique<StoreServer>(options, reservation->take_socket());
    } catch (const rendezvous::Error& error) {
      throw LaunchError("cannot serve the rendezvous store on " + format_endpoint(options.host, options.port) + ": " +
                        error.what());
    }
    store_->start();
    if (store.port == 0) store.port = reservation->port();
  }

  probe_acceptor_.emplace(io_, tcp::endpoint(asio::ip::make_address(bind_host_), 0));
  accept_probes();

  self.probe_port = probe_acceptor_->local_endpoint().port();

  rendezvous::NodeMembership::Events events;
  events.on_round = [this](const RoundDecision& decision) { dispatch(event::RoundFormed{decision}); };
  events.on_round_end = [this](int round, const RoundEnd& end) {
    events_->round_ended(end, state_.node_id);
    dispatch(event::RoundEnded{round, end});
  };
  events.on_error = [this](const std::string& message, bool told_to_every_node) {
    dispatch(event::RendezvousFailed{message, told_to_every_node});
  };
  events.on_warning = [](const std::string& line) { print_line("warning: " + line); };
  events.on_waiting = [](const std::string& line) { print_line(line); };
  state_.node_id = self.id;
  state_.node_description = self.describe();
  StoreFactory stores = tcp_store_factory(store, token);
  if (config.etcd) {
    try {
      stores = etcd_store_factory(EtcdSession::create(io_.get_executor(), *config.etcd));
    } catch (const rendezvous::Error& error) {
      throw LaunchError(std::string("cannot use the etcd-v3 rendezvous: ") + error.what());
    }
  }
  membership_ = std::make_unique<rendezvous::NodeMembership>(io_, settings, std::move(stores), self, std::move(events));
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
  if (plan_.config.rendezvous.agent_worker_store) {
    // No store of the round's own: node 0's agent store serves the workers (store_port unused).
    return membership_->join(0, previous_rank_);
  }
  // Held open from the join until the round forms: if this node becomes group rank 0, the workers'
  // store serves on it, and nobody could take the port in between.
  next_worker_store_.emplace(io_, bind_host_, 0);
  membership_->join(next_worker_store_->port(), previous_rank_);
}

void Agent::enter_round(const RoundDecision& decision) {
  place_.group_rank = decision.group_rank_of(state_.node_id);
  place_.group_world_size = static_cast<int>(decision.nodes.size());
  place_.rank_base = decision.rank_base(place_.group_rank);
  place_.world_size = decision.world_size();
  place_.attempt = decision.round;
  const NodeInfo& node0 = decision.nodes.front();
  master_addr_ = node0.addr;
  master_port_number_ = node0.store_port;
  attempt_is_round_ = plan_.config.rendezvous.agent_worker_store;
  if (attempt_is_round_) {
    // torchrun's static job: MASTER_ADDR:MASTER_PORT = --master-addr:--master-port, the agent store.
    // PyTorch's env:// puts each attempt's keys under "/worker/place_.attempt<TORCHELASTIC_RESTART_COUNT>"
    // (ddprun::runtime does too): the round, not the restart count, numbers the attempt, since a
    // round after a lost or replaced node uses no restart and must not see the old round's keys.
    master_addr_ = plan_.config.master_addr;
    master_port_number_ = plan_.config.master_port;
  } else if (place_.group_rank == 0) {
    StoreServerOptions options;
    options.host = bind_host_;
    options.port = next_worker_store_->port();
    options.token = plan_.config.store_token;
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
  events_->round_formed(decision);
  board_->open(decision.round, static_cast<int>(decision.nodes.size()), membership_->stores());
  const int restart_count = decision.restart_count;
  print_line("round " + std::to_string(decision.round) + ": " + std::to_string(place_.group_world_size) +
             " node(s), world size " + std::to_string(place_.world_size) + "; this node is group rank " +
             std::to_string(place_.group_rank) + " with ranks " + std::to_string(place_.rank_base) + "-" +
             std::to_string(place_.rank_base + plan_.config.topology.nproc_per_node - 1) +
             (restart_count > 0 ? ", restart " + std::to_string(restart_count) : std::string()));
  if (plan_.config.verbose) {
    print_line(describe_round_result(decision.round, place_.group_world_size, place_.group_rank, place_.world_size,
                                     format_endpoint(master_addr_, master_port_number_)));
  }
}

void Agent::close_round() {
  board_->close();
  if (worker_store_) {
    worker_store_->stop();
    worker_store_.reset();
  }
  // The workers' keys of the ended attempt: the next one has its own prefix and never reads them,
  // but a job of many rounds should not keep every round's. This node's workers are gone, and no
  // worker of the next round can start before this node joins it (a static round needs every node).
  if (store_ && plan_.config.rendezvous.agent_worker_store) store_->erase_all_but(kRendezvousKeys);
  previous_rank_ = place_.group_rank;
}

void Agent::leave(RoundEnd end) {
  // Within close_timeout: the others learn it from this node's silence otherwise.
  close_timer_.emplace(io_, close_timeout_);
  close_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (!ec) dispatch(event::LeaveDone{});
  });
  membership_->end_round(std::move(end), [this] { dispatch(event::LeaveDone{}); });
}

}  // namespace ddprun::launcher

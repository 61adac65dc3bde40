#pragma once
/// NodeRounds: this node's side of a multi-node job's rendezvous rounds (several nodes, or c10d).
/// It hosts the rendezvous store when this node is the one to, answers peers' presence probes,
/// holds a port for the workers' store of the next round, and serves that store on group rank 0;
/// NodeMembership does the store exchanges. It decides nothing: the supervisor asks for each step
/// (join, enter, close, leave) through the agent, and what comes back (a round formed, a round
/// ended, the rendezvous failed, this node has left) goes to the handlers, which the agent turns
/// into supervisor events.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/launch_config.hpp"
#include "launcher/observe/attempt_view.hpp"
#include "launcher/port_reservation.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/round_record.hpp"

namespace ddprun::rendezvous {
class NodeMembership;
class StoreServer;
}

namespace ddprun::launcher {

/// Rendezvous keys live under this, in the same store as the workers' keys when they share it.
inline constexpr const char* kRendezvousKeys = "ddprun/";

struct RoundHandlers {
  std::function<void(const rendezvous::RoundDecision& decision)> on_round;  ///< a round formed
  /// Round `round` ended (a node failed, was lost, left, or the job finished).
  std::function<void(int round, const rendezvous::RoundEnd& end)> on_round_end;
  /// `told_to_every_node`: the store holds the same error for the other nodes, who still read it.
  std::function<void(const std::string& message, bool told_to_every_node)> on_error;
  /// leave() is over: the store took this node's end of the round, or close_timeout ran out.
  std::function<void()> on_left;
  std::function<void(const std::string& line)> print;  ///< one line of ddprun's own
};

/// What start() gives the agent.
struct RoundsStarted {
  /// The rendezvous store, when this node hosts it (the agent's from now on); null otherwise.
  std::unique_ptr<rendezvous::StoreServer> hosted_store;
  std::string node_id;           ///< this node's id in the rounds
  std::string node_description;  ///< "host (addr)", as messages name this node
};

/// Where a round put this node's workers.
struct RoundPlace {
  AttemptView view;             ///< its ranks; `attempt` is the round
  rendezvous::Endpoint master;  ///< MASTER_ADDR:MASTER_PORT: the workers' store
};

/// "round 3: 2 node(s), world size 8; this node is group rank 1 with ranks 4-7", and with -v the
/// round's result as torchrun logs it: the lines the agent prints as it enters a round.
std::vector<std::string> describe_round_entry(const rendezvous::RoundDecision& decision, const RoundPlace& place,
                                              int nproc_per_node, bool verbose);

class NodeRounds {
 public:
  /// `config` must outlive this object (the agent's plan).
  NodeRounds(boost::asio::io_context& io, const LaunchConfig& config, std::string hostname, RoundHandlers handlers);
  ~NodeRounds();
  NodeRounds(const NodeRounds&) = delete;
  NodeRounds& operator=(const NodeRounds&) = delete;

  /// Finds this node's address, hosts the rendezvous store when this node is the one to (a busy
  /// port fails here, before anything is created), opens the probe port and the membership.
  /// Throws LaunchError when the job cannot start.
  RoundsStarted start();

  /// JoinRound: asks to be in the next round (with a port for its workers' store held meanwhile).
  void join();
  /// EnterRound: this node's place in the round `decision` formed; on group rank 0 the workers'
  /// store serves from now on. Throws LaunchError when it cannot.
  RoundPlace enter(const rendezvous::RoundDecision& decision);
  /// CloseRound: the round's workers' store goes; `group_rank` (this node's in it) is asked for
  /// in the next join.
  void close(int group_rank);
  /// Leave: ends the round with `end`, told to the others; on_left once they are told, or after
  /// close_timeout.
  void leave(rendezvous::RoundEnd end);
  /// ReportFailure: a worker here failed; the round ends with `end` unless a peer turns out to be gone.
  void report_failure(rendezvous::RoundEnd end);
  /// MarkFinished: this node's workers all succeeded (the exit barrier).
  void mark_finished();

  /// LingerStore: the job ended for every node; the hosted store should stay until they have read it.
  void linger_store() { linger_store_ = true; }
  bool lingers() const { return linger_store_; }
  /// rdzv close_timeout: the most leave() waits, and the most a lingering store waits.
  std::chrono::milliseconds close_timeout() const { return close_timeout_; }
  /// Workers share the agent store across rounds (static, --worker-store agent): the round, not
  /// the restart count, numbers their attempt (TORCHELASTIC_RESTART_COUNT, PyTorch's key prefix).
  bool attempt_is_round() const;

  rendezvous::NodeMembership& membership() { return *membership_; }
  /// The job is over: the membership's connections close (before the stores they may talk to).
  void drop_membership();
  /// The job is over: the last round's workers' store stops.
  void stop_worker_store();

 private:
  void accept_probes();

  boost::asio::io_context& io_;
  const LaunchConfig& config_;
  std::string hostname_;
  RoundHandlers handlers_;

  std::unique_ptr<rendezvous::NodeMembership> membership_;
  std::optional<boost::asio::ip::tcp::acceptor> probe_acceptor_;  ///< presence port: connects succeed while we live
  std::string bind_host_;                                          ///< wildcard of the advertised address's family
  std::optional<PortReservation> next_worker_store_;               ///< candidate port for the next round
  std::unique_ptr<rendezvous::StoreServer> worker_store_;          ///< this round's, on group rank 0
  int previous_rank_ = -1;
  bool linger_store_ = false;  ///< the job ended: keep hosting the store until the others have left
  std::chrono::milliseconds close_timeout_{30000};  ///< rdzv close_timeout: the most leave() waits
  std::optional<boost::asio::steady_timer> close_timer_;
};

}  // namespace ddprun::launcher

#pragma once
/// NodeMembership: this node's part in a multi-node job's rendezvous, for the agent's event loop.
///
/// Store I/O is blocking (StoreClient, every call with a deadline), so it runs on threads of its
/// own, each with its own connection, and every outcome comes back as a handler posted on the
/// agent's io_context; the agent never blocks on the network. The threads:
///  - requests: join a round, end a round, mark this node finished, one after another;
///  - watcher: sleeps in the store's WAIT on the current round's end, and reports it;
///  - keep-alive: every keep_alive_interval writes this node's heartbeat and reads the other
///    nodes'; a node silent for interval x max_attempt is dropped (its round is ended with `lost`).
/// A store that has not answered a heartbeat for read_timeout is lost: a timer on the agent's loop,
/// re-armed by every answered heartbeat, says so (on_error) however long a failing call blocks.
/// Silence is only held against the others while this agent was itself running: when its own timers
/// ran late by more than heartbeat_timeout (StallWatch: stopped, starved), the others' heartbeats
/// and the store get a fresh start, and the messages say that this agent was unresponsive.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "rendezvous/endpoint.hpp"
#include "rendezvous/heartbeat_tracker.hpp"
#include "rendezvous/join_progress.hpp"
#include "rendezvous/rendezvous_settings.hpp"
#include "rendezvous/round_protocol.hpp"
#include "rendezvous/round_record.hpp"
#include "rendezvous/stall_watch.hpp"
#include "rendezvous/store_client.hpp"

namespace ddprun::launcher {

class NodeMembership {
 public:
  struct Events {
    std::function<void(rendezvous::RoundDecision)> on_round;  ///< a round this node is in has formed
    std::function<void(int round, rendezvous::RoundEnd)> on_round_end;  ///< the watched round ended
    /// The rendezvous failed; the job cannot go on here. `told_to_every_node`: the store holds
    /// the same error for the other nodes (a round whose decision is an error), who still read it.
    std::function<void(std::string message, bool told_to_every_node)> on_error;
    std::function<void(std::string)> on_warning;  ///< one line worth telling the user (optional)
    /// While this node waits for the store or for nodes, every kWaitingLineEvery after the first:
    /// where the wait stands (describe_join_progress), to print as it is (optional).
    std::function<void(std::string)> on_waiting;
  };

  /// Starts the threads; the requests thread connects to `store` first (retrying for the join
  /// deadline: node 0's store may come up after this node) and checks the job (run id, shape).
  NodeMembership(boost::asio::io_context& io, rendezvous::RendezvousSettings settings, rendezvous::Endpoint store,
                 std::optional<std::string> token, rendezvous::NodeInfo self, Events events);
  /// Interrupts whatever the threads are blocked in, and joins them.
  ~NodeMembership();
  /// How often a waiting node says so (Events::on_waiting).
  static constexpr std::chrono::seconds kWaitingLineEvery{5};

  NodeMembership(const NodeMembership&) = delete;
  NodeMembership& operator=(const NodeMembership&) = delete;

  /// Joins the next round with this round's candidate worker store port and this node's previous
  /// group rank; on_round or on_error follows.
  void join(int store_port, int previous_rank);

  /// Watches `decision`'s round: its end comes through on_round_end; its nodes' heartbeats are checked.
  void watch(const rendezvous::RoundDecision& decision);

  /// A local worker failed: probes the round's other agents first; when one is gone, the round ends
  /// as `lost` (a membership change, no restart used), else with `failure`.
  void report_failure(rendezvous::RoundEnd failure);

  /// Ends the watched round with `end` (unless it has ended); `done` runs on the agent's loop after
  /// the store answered or failed.
  void end_round(rendezvous::RoundEnd end, std::function<void()> done = {});

  /// This node's workers of the watched round all succeeded (the exit barrier).
  void mark_finished();

  const rendezvous::NodeInfo& self() const { return self_; }
  std::string store_address() const { return rendezvous::format_endpoint(store_.host, store_.port); }

 private:
  using Request = std::function<void(rendezvous::RoundProtocol&)>;

  void run_requests();
  void run_watcher();
  void run_keep_alive();
  void submit(Request request);
  /// Posts `handler` to the agent's loop unless this object is going away.
  void post(std::function<void()> handler);
  void fail(const std::string& message, bool told_to_every_node = false);
  void warn(const std::string& line);
  /// On the agent's loop: from now until the round forms (or the rendezvous fails), a line every
  /// kWaitingLineEvery says where the wait stands.
  void begin_waiting();
  void arm_waiting_line();
  /// From any thread: the wait's stage, as the requests thread learns it.
  void update_waiting(const rendezvous::JoinProgress& progress);
  void end_waiting();
  /// On the agent's loop: the store answered; lost unless it answers again within read_timeout.
  void store_answered();
  /// The message of a round end that drops this very node (the others saw it silent).
  std::string dropped_message(const std::string& message);
  rendezvous::StoreClientOptions client_options(std::chrono::milliseconds connect_timeout,
                                                std::chrono::milliseconds timeout) const;

  boost::asio::io_context& io_;
  const rendezvous::RendezvousSettings settings_;
  const rendezvous::Endpoint store_;
  const std::optional<std::string> token_;
  rendezvous::NodeInfo self_;
  Events events_;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool failed_ = false;
  std::deque<Request> requests_;
  std::optional<rendezvous::RoundDecision> watched_;  ///< the round the watcher and keep-alive follow
  std::chrono::steady_clock::time_point watched_since_;  ///< when watched_ was set
  /// This agent's own stalls, as its keep-alive and store_silence_ find them.
  rendezvous::StallWatch stall_watch_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  ///< false once destruction began
  std::string last_store_error_;                                 ///< for the message when the store is lost
  boost::asio::steady_timer store_silence_;                      ///< on the agent's loop
  boost::asio::steady_timer waiting_line_;                       ///< on the agent's loop
  // Under mutex_: the wait the waiting line describes.
  bool waiting_ = false;
  rendezvous::JoinProgress waiting_progress_;
  std::chrono::steady_clock::time_point waiting_since_;
  /// When the store last answered (on the agent's loop): store_silence_ runs from then.
  std::chrono::steady_clock::time_point store_answered_at_;

  /// The clients, so that the destructor can interrupt the calls they are blocked in.
  std::mutex clients_mutex_;
  std::vector<rendezvous::StoreClient*> clients_;

  std::thread requests_thread_;
  std::thread watcher_thread_;
  std::thread keep_alive_thread_;
};

}  // namespace ddprun::launcher

#pragma once
/// NodeMembership: this node's part in a multi-node job's rendezvous, on the agent's event loop.
///
/// Everything runs on the agent's io_context, as coroutines, and nothing blocks the loop. Each
/// coroutine has a store connection of its own (from the StoreFactory: an AsyncStoreClient or an
/// EtcdStore, one operation at a time each):
///  - requests: join a round, end a round, mark this node finished, report a worker's failure (the
///    peers are probed first), served one after another from a queue;
///  - watcher: one outstanding WAIT on the current round's end, which it reports;
///  - keep-alive: a timer; every keep_alive_interval it writes this node's heartbeat and reads the
///    other nodes'; a node silent for interval x max_attempt is dropped (its round is ended with
///    `lost`). Silence counts only while the store takes beats: after a beat that failed or took
///    longer than the interval (an etcd leader election), every node gets a fresh start.
/// A store that has not answered a heartbeat for read_timeout is lost: a timer, re-armed by every
/// answered heartbeat, says so (on_error) however long a failing call takes.
/// Silence is only held against the others while this agent was itself running: when its own timers
/// ran late by more than heartbeat_timeout (StallWatch: stopped, starved), the others' heartbeats
/// and the store get a fresh start, and the messages say that this agent was unresponsive.
///
/// Outcomes reach the agent as handlers posted on its loop (Events), never from inside a call.
///
/// Lifetime: the coroutines share the membership's state (they own it with the object). The
/// destructor marks it stopped and cancels every timer, connection and queued request, so that what
/// the loop resumes afterwards only winds down, calling no Events; poll the loop afterwards to let
/// it finish, or destroy the io_context. Use it on the loop's thread only.
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/endpoint.hpp"
#include "rendezvous/rendezvous_settings.hpp"
#include "rendezvous/round_record.hpp"
#include "rendezvous/store_factory.hpp"

namespace ddprun::rendezvous {

class NodeMembership {
 public:
  struct Events {
    std::function<void(RoundDecision)> on_round;         ///< a round this node is in has formed
    std::function<void(int round, RoundEnd)> on_round_end;  ///< the watched round ended
    /// The rendezvous failed; the job cannot go on here. `told_to_every_node`: the store holds
    /// the same error for the other nodes (a round whose decision is an error), who still read it.
    std::function<void(std::string message, bool told_to_every_node)> on_error;
    std::function<void(std::string)> on_warning;  ///< one line worth telling the user (optional)
    /// While this node waits for the store or for nodes, every kWaitingLineEvery after the first:
    /// where the wait stands (describe_join_progress), to print as it is (optional).
    std::function<void(std::string)> on_waiting;
  };

  /// Starts the coroutines on `io`: the requests one connects to `store` first (retrying for the
  /// join deadline: node 0's store may come up after this node) and checks the job (run id, shape).
  NodeMembership(boost::asio::io_context& io, RendezvousSettings settings, Endpoint store,
                 std::optional<std::string> token, NodeInfo self, Events events);
  /// The same on the stores `stores` opens (a TCPStore's, or etcd's: store_factory.hpp).
  NodeMembership(boost::asio::io_context& io, RendezvousSettings settings, StoreFactory stores, NodeInfo self,
                 Events events);
  /// Stops everything (see Lifetime above); no Event is called from then on.
  ~NodeMembership();
  /// How often a waiting node says so (Events::on_waiting).
  static constexpr std::chrono::seconds kWaitingLineEvery{5};

  NodeMembership(const NodeMembership&) = delete;
  NodeMembership& operator=(const NodeMembership&) = delete;

  /// Joins the next round with this round's candidate worker store port and this node's previous
  /// group rank; on_round or on_error follows.
  void join(int store_port, int previous_rank);

  /// Watches `decision`'s round: its end comes through on_round_end; its nodes' heartbeats are checked.
  void watch(const RoundDecision& decision);

  /// A local worker failed: probes the round's other agents first; when one is gone, the round ends
  /// as `lost` (a membership change, no restart used), else with `failure`.
  void report_failure(RoundEnd failure);

  /// Ends the watched round with `end` (unless it has ended); `done` runs on the agent's loop after
  /// the store answered or failed.
  void end_round(RoundEnd end, std::function<void()> done = {});

  /// This node's workers of the watched round all succeeded (the exit barrier).
  void mark_finished();

  const NodeInfo& self() const;
  std::string store_address() const;
  /// Where this membership opens its store connections (for the job board).
  const StoreFactory& stores() const;

  class State;  ///< what the coroutines share (internal)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ddprun::rendezvous

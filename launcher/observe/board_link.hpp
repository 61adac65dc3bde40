#pragma once
/// BoardLink: this node's side of the job board (multi-node jobs; rendezvous/job_board.hpp). Each
/// round has a board of its own on the rendezvous store. Each status sample publishes this node's
/// status there (bounded, board_status.hpp), reads the other nodes' into a cache that the status
/// endpoint serves with this node's own fresh sample, and looks for a new stack request: a request
/// asked of any agent (`ddprun stacks`, /api/stacks) is answered by every agent with its own ranks'
/// stacks, and the asking agent serves them all.
///
/// The endpoint's status is synchronous: it serves the cache, refreshed from the board once a
/// second, so another node's ranks are at most about two seconds old.
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/observe/attempt_view.hpp"
#include "launcher/observe/job_status.hpp"
#include "launcher/observe/status_http.hpp"
#include "rendezvous/job_board.hpp"
#include "rendezvous/store_factory.hpp"

namespace ddprun::launcher {

class NodeStacks;
class StatusWatch;

class BoardLink {
 public:
  BoardLink(boost::asio::io_context& io, std::string run_id, const AttemptView& attempt, StatusWatch& status,
            NodeStacks& stacks);
  ~BoardLink();
  BoardLink(const BoardLink&) = delete;
  BoardLink& operator=(const BoardLink&) = delete;

  /// A new round of `nodes` nodes: a board of its own on `stores` (the last round's goes), and
  /// status samples from now on (the other nodes read this node's whether or not anyone here looks).
  void open(int round, int nodes, rendezvous::StoreFactory stores);
  /// The round ended or the job ends: the board goes, and its store connection (the store's host
  /// waits for its clients to leave). What waited on it is told.
  void close();
  bool is_open() const { return board_ != nullptr; }
  /// Nodes in the board's round.
  int nodes() const { return nodes_; }

  /// A status sample (a StatusWatch listener): published, the others' read, requests looked for.
  void on_sample(const NodeStatus& node);
  /// The other nodes' latest statuses added to `job` (this node's is there), by node rank.
  void add_nodes(JobStatus& job) const;
  /// Every node's stacks: a request on the board, then each node's answer (up to 10 s); `done`
  /// once, later, on the loop. Only while open.
  void stacks(std::function<void(StacksReply)> done);
  /// A hang's whole-job digest: asks every other node for its stacks, and calls `done` once, on
  /// the loop, with the job's stacks (`own`: the hang's capture here; a node that does not answer
  /// within the wait is named in the digest; `error` set when the others could not be asked), or
  /// with nullopt when the board closes first. False (nothing done) without a board of two nodes
  /// or more.
  bool gather_hang_stacks(std::vector<RankStacks> own, std::function<void(std::optional<StacksReply>)> done);

 private:
  /// Captures this node's ranks and publishes them as its answer to the requests up to `latest`.
  void answer_stack_request(std::int64_t latest);
  /// The other nodes' answers to `request`: read in short turns until all are there or the wait is
  /// over, so that the board checks for other nodes' requests between turns. `done` is not called
  /// when the board closes first (close() tells the waiters).
  void read_other_stacks(int round, std::int64_t request, std::function<void(rendezvous::BoardRead)> done);

  boost::asio::io_context& io_;
  std::string run_id_;
  const AttemptView& attempt_;
  StatusWatch& status_;
  NodeStacks& stacks_;
  std::unique_ptr<rendezvous::JobBoard> board_;
  int round_ = -1;
  int nodes_ = 0;
  std::vector<NodeStatus> others_;  ///< the other nodes' statuses as last read
  bool reading_ = false;            ///< a read of the statuses is under way
  bool checking_ = false;           ///< a look for a new stack request is under way
  std::int64_t answered_ = 0;       ///< the newest stack request this node answered
  std::vector<std::int64_t> own_requests_;  ///< requests this node made, answered by its asker
  std::vector<std::function<void(StacksReply)>> stacks_waiting_;
  std::function<void(std::optional<StacksReply>)> hang_gather_done_;  ///< until it is called
};

}  // namespace ddprun::launcher

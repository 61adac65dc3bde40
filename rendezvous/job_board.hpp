#pragma once
/// JobBoard: what the agents of a multi-node job tell each other about the running job, beside the
/// rounds: each node's status (a small JSON document, once a second), and stack requests with each
/// node's answer. It lives on the rendezvous store, under "ddprun/rdzv/<run id>/board/<round>/", so
/// a round's board goes with its round; any agent can read the whole job from it.
///
/// The bytes are opaque here (the launcher's status JSON): this layer knows only keys and bounds.
///
/// One connection of its own (an AsyncStoreClient, or the Options' StoreFactory's, on the agent's loop), so a slow board never delays
/// the rounds or the heartbeats. Operations run one at a time, in order; nothing piles up:
///  - a status published while the previous one is not yet sent replaces it (latest wins);
///  - at most kMaxPendingReads reads wait; one more is answered at once with an error;
///  - a value over the size limit is refused before anything is sent.
/// Results reach the caller as handlers on the loop, never from inside a call. A store that fails
/// an operation fails only that operation (the next one reconnects); the error text names the store.
///
/// Lifetime: the destructor cancels the pending operation and every queued one; no handler is
/// called after it. Use it on the loop's thread only.
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/endpoint.hpp"
#include "rendezvous/store_factory.hpp"

namespace ddprun::rendezvous {

/// One node's entry on the board: its bytes, or nothing (the node has not published, or has gone).
using BoardEntries = std::vector<std::optional<std::string>>;

/// What a read gives its handler: the entries, or why there are none.
struct BoardRead {
  BoardEntries entries;
  std::string error;  ///< empty when the read succeeded
};

class JobBoard {
 public:
  /// The most a queued read may wait for its turn; more are refused (a board read is on demand:
  /// a status page or `ddprun stacks`, never a backlog).
  static constexpr std::size_t kMaxPendingReads = 16;

  struct Options {
    Endpoint store;
    std::optional<std::string> token;
    /// When set, the board's connection comes from here instead (etcd-v3), not from store/token.
    std::optional<StoreFactory> stores;
    std::string run_id;
    std::size_t max_value_bytes = 256 * 1024;               ///< a status or a stacks answer
    std::chrono::milliseconds timeout{std::chrono::seconds(10)};  ///< per store operation
  };

  JobBoard(boost::asio::io_context& io, Options options);
  ~JobBoard();
  JobBoard(const JobBoard&) = delete;
  JobBoard& operator=(const JobBoard&) = delete;

  /// Publishes node `node`'s status in `round` (latest wins). `done` (optional) gets the error text,
  /// empty on success; a status replaced before it was sent gets "replaced".
  void publish_status(int round, int node, std::string bytes, std::function<void(std::string)> done = {});
  /// The statuses of nodes 0..nodes-1 in `round`, as they are now (a missing one is nullopt).
  void read_statuses(int round, int nodes, std::function<void(BoardRead)> done);

  /// Asks every node of `round` for its stacks: `done` gets the request's number (>= 1), or 0 and
  /// the error.
  void request_stacks(int round, std::function<void(std::int64_t, std::string)> done);
  /// The newest stack request of `round` (0: none yet), for the nodes that answer them.
  void latest_stack_request(int round, std::function<void(std::int64_t, std::string)> done);
  /// Node `node`'s answer to request `request`.
  void publish_stacks(int round, std::int64_t request, int node, std::string bytes,
                      std::function<void(std::string)> done = {});
  /// The answers of nodes 0..nodes-1 to `request`: waits up to `wait` for all of them but `asker`
  /// (the asking node, whose own ranks are at hand: it never answers on the board), then gives what
  /// is there (a node that did not answer, and `asker`, are nullopt).
  void read_stacks(int round, std::int64_t request, int nodes, int asker, std::chrono::milliseconds wait,
                   std::function<void(BoardRead)> done);

  /// "ddprun/rdzv/<run id>/board/<round>/status/<node>" and the like, for tests and messages.
  std::string status_key(int round, int node) const;
  std::string stack_request_key(int round) const;
  std::string stacks_key(int round, std::int64_t request, int node) const;

  class State;  ///< the queue and the connection, shared with the running operation (internal)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ddprun::rendezvous

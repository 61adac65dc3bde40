#include "launcher/node_membership.hpp"

#include <boost/asio/post.hpp>

#include "rendezvous/deadline_socket.hpp"  // describe_duration
#include "rendezvous/peer_probe.hpp"
#include "rendezvous/rendezvous_error.hpp"
#include "rendezvous/round_keys.hpp"
#include "rendezvous/store_error.hpp"

namespace asio = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace ddprun::launcher {
namespace {

using namespace ddprun::rendezvous;

/// A WAIT on the round's end is re-armed after this long; the watcher is woken by the store, and
/// this only bounds how long a silently dead connection could hide (the keep-alive notices first).
constexpr milliseconds kEndWaitSlice{std::chrono::minutes(10)};

/// Registers a client for interrupt() while it lives.
class ClientRegistration {
 public:
  ClientRegistration(std::mutex& mutex, std::vector<StoreClient*>& clients, StoreClient& client)
      : mutex_(mutex), clients_(clients), client_(client) {
    std::lock_guard lock(mutex_);
    clients_.push_back(&client_);
  }
  ~ClientRegistration() {
    std::lock_guard lock(mutex_);
    std::erase(clients_, &client_);
  }
  ClientRegistration(const ClientRegistration&) = delete;
  ClientRegistration& operator=(const ClientRegistration&) = delete;

 private:
  std::mutex& mutex_;
  std::vector<StoreClient*>& clients_;
  StoreClient& client_;
};

/// "a (10.0.0.1)" for each of `ids` in `round`.
std::vector<std::string> describe_nodes(const RoundDecision& round, const std::vector<std::string>& ids) {
  std::vector<std::string> described;
  for (const auto& id : ids) {
    int rank = round.group_rank_of(id);
    described.push_back(rank >= 0 ? round.nodes.at(static_cast<std::size_t>(rank)).describe() : id);
  }
  return described;
}

}  // namespace

NodeMembership::NodeMembership(asio::io_context& io, RendezvousSettings settings, Endpoint store,
                               std::optional<std::string> token, NodeInfo self, Events events)
    : io_(io),
      settings_(std::move(settings)),
      store_(std::move(store)),
      token_(std::move(token)),
      self_(std::move(self)),
      events_(std::move(events)),
      stall_watch_(settings_.heartbeat_timeout),
      store_silence_(io),
      waiting_line_(io) {
  waiting_progress_.is_static = settings_.is_static;
  waiting_progress_.min_nodes = settings_.min_nodes;
  waiting_progress_.max_nodes = settings_.max_nodes;
  waiting_progress_.store = store_address();
  waiting_progress_.timeout = settings_.join_deadline();
  begin_waiting();
  requests_thread_ = std::thread([this] { run_requests(); });
  watcher_thread_ = std::thread([this] { run_watcher(); });
  keep_alive_thread_ = std::thread([this] { run_keep_alive(); });
}

NodeMembership::~NodeMembership() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    *alive_ = false;
  }
  wake_.notify_all();
  {
    std::lock_guard lock(clients_mutex_);
    for (StoreClient* client : clients_) client->interrupt();
  }
  for (std::thread* thread : {&requests_thread_, &watcher_thread_, &keep_alive_thread_}) {
    if (thread->joinable()) thread->join();
  }
}

StoreClientOptions NodeMembership::client_options(milliseconds connect_timeout, milliseconds timeout) const {
  StoreClientOptions options;
  options.host = store_.host;
  options.port = store_.port;
  options.connect_timeout = connect_timeout;
  options.timeout = timeout;
  options.token = token_;
  options.defer_connect = true;  // registered first, so that the destructor can interrupt the connect
  return options;
}

void NodeMembership::post(std::function<void()> handler) {
  asio::post(io_, [alive = alive_, handler = std::move(handler)] {
    if (*alive) handler();
  });
}

void NodeMembership::fail(const std::string& message, bool told_to_every_node) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || failed_) return;
    failed_ = true;
  }
  post([this, message, told_to_every_node] { events_.on_error(message, told_to_every_node); });
}

void NodeMembership::warn(const std::string& line) {
  post([this, line] {
    if (events_.on_warning) events_.on_warning(line);
  });
}

void NodeMembership::begin_waiting() {
  {
    std::lock_guard lock(mutex_);
    waiting_ = true;
    waiting_since_ = Clock::now();
  }
  arm_waiting_line();
}

void NodeMembership::arm_waiting_line() {
  waiting_line_.expires_after(kWaitingLineEvery);
  waiting_line_.async_wait([this, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive) return;
    std::string line;
    {
      std::lock_guard lock(mutex_);
      if (!waiting_ || failed_) return;
      JoinProgress progress = waiting_progress_;
      progress.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - waiting_since_);
      line = describe_join_progress(progress);
    }
    if (events_.on_waiting) events_.on_waiting(line);
    arm_waiting_line();
  });
}

void NodeMembership::update_waiting(const JoinProgress& progress) {
  std::lock_guard lock(mutex_);
  waiting_progress_.stage = progress.stage;
  waiting_progress_.joined = progress.joined;
  waiting_progress_.missing_ranks = progress.missing_ranks;
}

void NodeMembership::end_waiting() {
  std::lock_guard lock(mutex_);
  waiting_ = false;
}

void NodeMembership::store_answered() {
  const auto since = Clock::now();
  store_answered_at_ = since;
  store_silence_.expires_at(since + settings_.read_timeout);
  store_silence_.async_wait([this, alive = alive_, since](const boost::system::error_code& ec) {
    // An answer that came after this timer had expired, but before this handler ran, re-armed it.
    if (ec || !*alive || since != store_answered_at_) return;
    std::string last_error;
    {
      std::lock_guard lock(mutex_);
      // This agent stood still, not the store: the keep-alive says so when it wakes, and the store
      // gets a whole read_timeout to answer again.
      if (stall_watch_.fired(since + settings_.read_timeout, Clock::now(), since)) {
        asio::post(io_, [this, alive] {
          if (*alive) store_answered();
        });
        return;
      }
      last_error = last_store_error_;
    }
    fail("lost the rendezvous store at " + store_address() + ": no answer for " + describe_duration(settings_.read_timeout) +
         " (read_timeout)" + (last_error.empty() ? std::string() : "; last error: " + last_error));
  });
}

void NodeMembership::submit(Request request) {
  {
    std::lock_guard lock(mutex_);
    requests_.push_back(std::move(request));
  }
  wake_.notify_all();
}

void NodeMembership::join(int store_port, int previous_rank) {
  // The first join's wait began with the connect (the constructor); a later one begins now.
  if (previous_rank >= 0) begin_waiting();
  submit([this, store_port, previous_rank](RoundProtocol& protocol) {
    NodeInfo me = self_;
    me.store_port = store_port;
    me.previous_rank = previous_rank;
    RoundDecision decision = protocol.join(me);
    end_waiting();
    post([this, decision] { events_.on_round(decision); });
  });
}

void NodeMembership::watch(const RoundDecision& decision) {
  {
    std::lock_guard lock(mutex_);
    watched_ = decision;
    watched_since_ = Clock::now();
  }
  wake_.notify_all();
}

void NodeMembership::report_failure(RoundEnd failure) {
  submit([this, failure](RoundProtocol& protocol) {
    std::optional<RoundDecision> round;
    {
      std::lock_guard lock(mutex_);
      round = watched_;
    }
    if (!round) return;
    std::vector<const NodeInfo*> peers;
    std::vector<Endpoint> endpoints;
    for (const auto& node : round->nodes) {
      if (node.id == self_.id) continue;
      peers.push_back(&node);
      endpoints.push_back(Endpoint{node.addr, node.probe_port});
    }
    RoundEnd end = failure;
    // A worker that failed because a peer died with its agent is no reason to use up a restart.
    auto gone = unreachable_peers(endpoints, settings_.heartbeat_timeout);
    if (!gone.empty()) {
      const NodeInfo& lost = *peers.at(gone.front());
      end = RoundEnd{EndKind::lost, lost.id, "node " + lost.describe() + " is gone: its agent does not answer"};
    }
    protocol.end_round(round->round, end);
  });
}

void NodeMembership::end_round(RoundEnd end, std::function<void()> done) {
  submit([this, end, done = std::move(done)](RoundProtocol& protocol) {
    std::optional<int> round;
    {
      std::lock_guard lock(mutex_);
      if (watched_) round = watched_->round;
    }
    try {
      if (round) protocol.end_round(*round, end);
    } catch (const StoreError&) {
      // The caller is leaving; what it could not say, the others learn from its heartbeat.
    }
    if (done) post(done);
  });
}

void NodeMembership::mark_finished() {
  submit([this](RoundProtocol& protocol) {
    std::optional<RoundDecision> round;
    {
      std::lock_guard lock(mutex_);
      round = watched_;
    }
    if (round) protocol.mark_finished(*round, self_);
  });
}

void NodeMembership::run_requests() {
  // Node 0's store may come up after this node: the first connect retries for the join deadline.
  StoreClient client(client_options(settings_.join_deadline(), settings_.read_timeout));
  ClientRegistration registration(clients_mutex_, clients_, client);
  RoundProtocol protocol(client, settings_);
  protocol.on_join_progress([this](const JoinProgress& progress) { update_waiting(progress); }, kWaitingLineEvery);
  try {
    client.connect();
    {
      JoinProgress joining;
      joining.stage = JoinProgress::Stage::joining;
      update_waiting(joining);
    }
    protocol.check_job(self_);
  } catch (const StoreError& error) {
    return fail(std::string(error.what()) + (settings_.is_static
                                                 ? " (node 0 hosts it at --master-addr:--master-port)"
                                                 : " (the agent on the --rdzv-endpoint machine hosts it)"));
  } catch (const RendezvousError& error) {
    return fail(error.what());
  }
  for (;;) {
    Request request;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !requests_.empty(); });
      if (stopping_) return;
      request = std::move(requests_.front());
      requests_.pop_front();
    }
    try {
      request(protocol);
    } catch (const RoundFailed& error) {
      return fail(error.what(), /*told_to_every_node=*/true);
    } catch (const RendezvousError& error) {
      return fail(error.what());
    } catch (const StoreError& error) {
      return fail("lost the rendezvous store at " + store_address() + ": " + error.what());
    }
  }
}

void NodeMembership::run_watcher() {
  StoreClient client(client_options(settings_.read_timeout, settings_.read_timeout));
  ClientRegistration registration(clients_mutex_, clients_, client);
  RoundProtocol protocol(client, settings_);
  int reported = -1;
  bool failed_once = false;
  for (;;) {
    int round = 0;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || (watched_ && watched_->round != reported); });
      if (stopping_) return;
      round = watched_->round;
    }
    try {
      RoundEnd end = protocol.wait_end(round, kEndWaitSlice);
      if (end.kind == EndKind::lost && end.node == self_.id) end.message = dropped_message(end.message);
      failed_once = false;
      reported = round;
      post([this, round, end] { events_.on_round_end(round, end); });
    } catch (const StoreTimeout&) {
      // Re-arm.
    } catch (const StoreError& error) {
      // The connection broke (the store's host may be gone): the next call reconnects, retrying
      // for read_timeout; a second failure in a row means the store is lost.
      if (failed_once) return fail("lost the rendezvous store at " + store_address() + ": " + error.what());
      failed_once = true;
    } catch (const RendezvousError& error) {
      return fail(error.what());
    }
  }
}

void NodeMembership::run_keep_alive() {
  StoreClient client(client_options(settings_.heartbeat_timeout, settings_.heartbeat_timeout));
  ClientRegistration registration(clients_mutex_, clients_, client);
  RoundProtocol protocol(client, settings_);
  HeartbeatTracker tracker(settings_.lost_after());
  std::int64_t counter = 0;
  int tracked_round = -1;
  int reported_round = -1;
  for (;;) {
    std::optional<RoundDecision> round;
    std::optional<StallWatch::Stall> stall;
    {
      std::unique_lock lock(mutex_);
      // Idle until the first round forms (join() wrote the first heartbeat); then every interval.
      if (counter == 0) {
        wake_.wait(lock, [this] { return stopping_ || watched_.has_value(); });
      } else {
        stall_watch_.sleeping_until(Clock::now() + settings_.keep_alive_interval);
        wake_.wait_for(lock, settings_.keep_alive_interval, [this] { return stopping_; });
      }
      if (stopping_) return;
      stall = stall_watch_.woke(Clock::now());
      round = watched_;
    }
    try {
      protocol.beat(self_.id, ++counter);
      // The counters read below are the store's as of this moment or later: judged as of now, a
      // stall of this agent inside the read cannot pass for the others' silence.
      const auto looked = Clock::now();
      if (round->round != tracked_round) {
        std::vector<std::string> peers;
        for (const auto& node : round->nodes) {
          if (node.id != self_.id) peers.push_back(node.id);
        }
        tracker.watch(peers, looked);
        tracked_round = round->round;
      }
      if (!tracker.watched().empty()) tracker.observe(protocol.read_beats(tracker.watched()), looked);
      post([this] { store_answered(); });
      auto lost = tracker.lost(looked);
      if (stall) {
        // This agent stood still; the others may have been unable to beat meanwhile (the store may
        // be this agent's): their silence so far proves nothing.
        tracker.excuse_silence(looked);
        bool untold = false;
        {
          std::lock_guard lock(mutex_);
          untold = stall_watch_.claim_telling();
        }
        if (untold || !lost.empty()) warn(describe_own_stall(stall->length(), describe_nodes(*round, lost)));
        lost.clear();
      }
      if (!lost.empty() && reported_round != round->round) {
        reported_round = round->round;
        const NodeInfo& node = round->nodes.at(static_cast<std::size_t>(round->group_rank_of(lost.front())));
        protocol.end_round(round->round, RoundEnd{EndKind::lost, node.id,
                                                  "node " + node.describe() + " stopped heart-beating (nothing for " +
                                                      describe_duration(settings_.lost_after()) + ")"});
      }
    } catch (const StoreError& error) {
      // A late or failed beat is a missed one; only a store silent for read_timeout is lost, which
      // store_silence_ tells on the agent's loop.
      std::lock_guard lock(mutex_);
      last_store_error_ = error.what();
    } catch (const RendezvousError& error) {
      return fail(error.what());
    }
  }
}

std::string NodeMembership::dropped_message(const std::string& message) {
  std::optional<StallWatch::Stall> stall;
  {
    std::lock_guard lock(mutex_);
    stall = stall_watch_.tell(watched_since_, Clock::now());
  }
  if (!stall) return "the other nodes dropped this agent: " + message;
  // The keep-alive may have woken first and said how long already.
  if (stall->told) return "the other nodes dropped this agent while it was unresponsive: " + message;
  return describe_own_stall(stall->length(), {}) + ", and the other nodes dropped it: " + message;
}

}  // namespace ddprun::launcher

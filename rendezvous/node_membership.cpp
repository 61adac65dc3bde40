#include "rendezvous/node_membership.hpp"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>

#include "rendezvous/deadline.hpp"  // describe_duration
#include "rendezvous/heartbeat_tracker.hpp"
#include "rendezvous/join_progress.hpp"
#include "rendezvous/peer_probe.hpp"
#include "rendezvous/rendezvous_error.hpp"
#include "rendezvous/round_protocol.hpp"
#include "rendezvous/stall_watch.hpp"
#include "rendezvous/store_error.hpp"

namespace asio = boost::asio;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace ddprun::rendezvous {
namespace {

/// A WAIT on the round's end is re-armed after this long; the watcher is woken by the store, and
/// this only bounds how long a silently dead connection could hide (the keep-alive notices first).
constexpr milliseconds kEndWaitSlice{std::chrono::minutes(10)};

/// After a beat the store did not take: the pause before the next (at most keep_alive_interval).
constexpr milliseconds kRetryBeatAfter{500};

/// "a (10.0.0.1)" for each of `ids` in `round`.
std::vector<std::string> describe_nodes(const RoundDecision& round, const std::vector<std::string>& ids) {
  std::vector<std::string> described;
  for (const auto& id : ids) {
    int rank = round.group_rank_of(id);
    described.push_back(rank >= 0 ? round.nodes.at(static_cast<std::size_t>(rank)).describe() : id);
  }
  return described;
}

/// Sleeps until `timer` expires or is cancelled.
Task<void> sleep_on(asio::steady_timer& timer) {
  boost::system::error_code ignored;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

/// What the agent asked for, served in order by the requests coroutine.
struct Request {
  enum class Kind { join, report_failure, end_round, mark_finished };
  Kind kind = Kind::join;
  int store_port = 0;
  int previous_rank = -1;
  RoundEnd end;                ///< report_failure, end_round
  std::function<void()> done;  ///< end_round
};

}  // namespace

class NodeMembership::State : public std::enable_shared_from_this<State> {
 public:
  State(asio::io_context& io_context, RendezvousSettings rendezvous, StoreFactory factory, NodeInfo me,
        Events handlers)
      : io(io_context),
        settings(std::move(rendezvous)),
        stores(std::move(factory)),
        self(std::move(me)),
        events(std::move(handlers)),
        // Node 0's store may come up after this node: the requests' connects retry for the join deadline.
        requests_client(stores.open(io.get_executor(), settings.join_deadline(), settings.read_timeout)),
        watcher_client(stores.open(io.get_executor(), settings.read_timeout, settings.read_timeout)),
        keep_alive_client(stores.open(io.get_executor(), settings.heartbeat_timeout, settings.heartbeat_timeout)),
        requests_protocol(*requests_client, settings),
        watcher_protocol(*watcher_client, settings),
        keep_alive_protocol(*keep_alive_client, settings),
        changed(io, Clock::time_point::max()),
        beat_timer(io),
        stall_watch(settings.heartbeat_timeout),
        store_silence(io),
        waiting_line(io) {
    waiting_progress.is_static = settings.is_static;
    waiting_progress.min_nodes = settings.min_nodes;
    waiting_progress.max_nodes = settings.max_nodes;
    waiting_progress.store = address();
    waiting_progress.timeout = settings.join_deadline();
  }

  std::string address() const { return stores.address; }

  /// Wakes every coroutine waiting for a change (a request, a watched round, the stop) to look again.
  void notify() {
    changed.expires_at(Clock::time_point::max());  // cancels the waits, and stays armed for the next
  }
  /// Waits for the next notify().
  Task<void> next_change() { co_await sleep_on(changed); }

  /// Runs `handler` on the agent's loop as an event of its own, unless stopped by then.
  void post(std::function<void()> handler) {
    asio::post(io, [self = shared_from_this(), handler = std::move(handler)] {
      if (!self->stopped) handler();
    });
  }

  void fail(const std::string& message, bool told_to_every_node = false) {
    if (stopped || failed) return;
    failed = true;
    post([this, message, told_to_every_node] { events.on_error(message, told_to_every_node); });
  }
  void warn(const std::string& line) {
    post([this, line] {
      if (events.on_warning) events.on_warning(line);
    });
  }

  void stop() {
    stopped = true;
    requests.clear();
    changed.cancel();
    beat_timer.cancel();
    store_silence.cancel();
    waiting_line.cancel();
    requests_client->cancel();
    watcher_client->cancel();
    keep_alive_client->cancel();
  }

  // The waiting line.
  void begin_waiting();
  void arm_waiting_line();
  void update_waiting(const JoinProgress& progress);
  void store_answered();
  void store_asked();
  void arm_store_silence(Clock::time_point since, Clock::time_point deadline);
  std::string dropped_message(const std::string& message);

  // The coroutines; each owns the state with the membership (`self` is the shared pointer).
  static Task<void> run_requests(std::shared_ptr<State> self);
  static Task<void> serve(std::shared_ptr<State> self, Request request);
  static Task<void> run_watcher(std::shared_ptr<State> self);
  static Task<void> run_keep_alive(std::shared_ptr<State> self);

  asio::io_context& io;
  const RendezvousSettings settings;
  const StoreFactory stores;
  NodeInfo self;
  Events events;

  /// The one liveness flag: set by the membership's destructor. Whatever runs on the loop after
  /// that (a coroutine, a posted event, a timer's handler) owns this state and only winds down.
  bool stopped = false;
  bool failed = false;

  std::unique_ptr<Store> requests_client;
  std::unique_ptr<Store> watcher_client;
  std::unique_ptr<Store> keep_alive_client;
  RoundProtocol requests_protocol;
  RoundProtocol watcher_protocol;
  RoundProtocol keep_alive_protocol;

  std::deque<Request> requests;
  std::optional<RoundDecision> watched;  ///< the round the watcher and keep-alive follow
  Clock::time_point watched_since;       ///< when watched was set
  asio::steady_timer changed;            ///< never expires: notify() cancels its waits
  asio::steady_timer beat_timer;         ///< the keep-alive's interval
  /// This agent's own stalls, as its keep-alive and store_silence find them.
  StallWatch stall_watch;
  std::string last_store_error;  ///< for the message when the store is lost
  asio::steady_timer store_silence;
  asio::steady_timer waiting_line;
  // The wait the waiting line describes.
  bool waiting = false;
  JoinProgress waiting_progress;
  Clock::time_point waiting_since;
  /// When the store last answered.
  Clock::time_point store_answered_at;
  /// When the keep-alive first asked the store something it has not answered yet: the store's
  /// silence counts from then (between beats nothing is asked, so nothing is unanswered).
  std::optional<Clock::time_point> first_unanswered_ask;
};

void NodeMembership::State::begin_waiting() {
  waiting = true;
  waiting_since = Clock::now();
  arm_waiting_line();
}

void NodeMembership::State::arm_waiting_line() {
  waiting_line.expires_after(kWaitingLineEvery);
  waiting_line.async_wait([this, self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || stopped) return;
    if (!waiting || failed) return;
    JoinProgress progress = waiting_progress;
    progress.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - waiting_since);
    if (events.on_waiting) events.on_waiting(describe_join_progress(progress));
    arm_waiting_line();
  });
}

void NodeMembership::State::update_waiting(const JoinProgress& progress) {
  waiting_progress.stage = progress.stage;
  waiting_progress.joined = progress.joined;
  waiting_progress.missing_ranks = progress.missing_ranks;
}

void NodeMembership::State::store_answered() {
  const auto since = Clock::now();
  store_answered_at = since;
  first_unanswered_ask.reset();
  arm_store_silence(since, since + settings.read_timeout);
}

void NodeMembership::State::store_asked() {
  if (!first_unanswered_ask) first_unanswered_ask = Clock::now();
}

void NodeMembership::State::arm_store_silence(Clock::time_point since, Clock::time_point deadline) {
  store_silence.expires_at(deadline);
  store_silence.async_wait([this, self = shared_from_this(), since, deadline](const boost::system::error_code& ec) {
    // An answer that came after this timer had expired, but before this handler ran, re-armed it.
    if (ec || stopped || since != store_answered_at) return;
    // This agent stood still, not the store: the keep-alive says so when it wakes, and the store
    // gets a whole read_timeout to answer again.
    if (stall_watch.fired(deadline, Clock::now(), since)) return store_answered();
    // The store is silent only from the first question it left unanswered: an outage that began
    // between two beats gets its whole read_timeout too (etcd: a majority lost for less than that).
    const auto silent_until = first_unanswered_ask ? *first_unanswered_ask + settings.read_timeout
                                                   : Clock::now() + settings.read_timeout;
    if (silent_until > Clock::now()) return arm_store_silence(since, silent_until);
    fail("lost the rendezvous store at " + address() + ": no answer for " + describe_duration(settings.read_timeout) +
         " (read_timeout)" + (last_store_error.empty() ? std::string() : "; last error: " + last_store_error));
  });
}

std::string NodeMembership::State::dropped_message(const std::string& message) {
  auto stall = stall_watch.tell(watched_since, Clock::now());
  if (!stall) return "the other nodes dropped this agent: " + message;
  // The keep-alive may have woken first and said how long already.
  if (stall->told) return "the other nodes dropped this agent while it was unresponsive: " + message;
  return describe_own_stall(stall->length(), {}) + ", and the other nodes dropped it: " + message;
}

Task<void> NodeMembership::State::run_requests(std::shared_ptr<State> self) {
  State& s = *self;
  s.requests_protocol.on_join_progress([&s](const JoinProgress& progress) { s.update_waiting(progress); },
                                       kWaitingLineEvery);
  std::optional<std::string> failure;
  try {
    co_await s.requests_client->connect();
    JoinProgress joining;
    joining.stage = JoinProgress::Stage::joining;
    s.update_waiting(joining);
    co_await s.requests_protocol.check_job(s.self);
  } catch (const StoreError& error) {
    failure = std::string(error.what());
    if (s.stores.hosted_by_an_agent) {
      *failure += s.settings.is_static ? " (node 0 hosts it at --master-addr:--master-port)"
                                       : " (the agent on the --rdzv-endpoint machine hosts it)";
    }
  } catch (const RendezvousError& error) {
    failure = error.what();
    // On a store that outlives jobs, the keys may be another job's that used the same run id.
    if (!s.stores.key_space.empty()) {
      *failure += " (" + s.stores.key_space + " holds job '" + s.settings.run_id +
                  "': if that is another job, give this one its own --rdzv-id or key_prefix in --rdzv-conf)";
    }
  }
  if (failure) co_return s.fail(*failure);
  for (;;) {
    while (!s.stopped && s.requests.empty()) co_await s.next_change();
    if (s.stopped) co_return;
    Request request = std::move(s.requests.front());
    s.requests.pop_front();
    bool told_to_every_node = false;
    try {
      co_await serve(self, std::move(request));
    } catch (const RoundFailed& error) {
      failure = error.what();
      told_to_every_node = true;
    } catch (const RendezvousError& error) {
      failure = error.what();
    } catch (const StoreError& error) {
      failure = "lost the rendezvous store at " + s.address() + ": " + error.what();
    }
    if (failure) co_return s.fail(*failure, told_to_every_node);
  }
}

Task<void> NodeMembership::State::serve(std::shared_ptr<State> self, Request request) {
  State& s = *self;
  switch (request.kind) {
    case Request::Kind::join: {
      NodeInfo me = s.self;
      me.store_port = request.store_port;
      me.previous_rank = request.previous_rank;
      RoundDecision decision = co_await s.requests_protocol.join(std::move(me));
      s.waiting = false;
      s.post([&s, decision] { s.events.on_round(decision); });
      co_return;
    }
    case Request::Kind::report_failure: {
      if (!s.watched) co_return;
      const RoundDecision round = *s.watched;
      std::vector<const NodeInfo*> peers;
      std::vector<Endpoint> endpoints;
      for (const auto& node : round.nodes) {
        if (node.id == s.self.id) continue;
        peers.push_back(&node);
        endpoints.push_back(Endpoint{node.addr, node.probe_port});
      }
      RoundEnd end = request.end;
      // A worker that failed because a peer died with its agent is no reason to use up a restart.
      const std::vector<std::size_t> gone =
          co_await unreachable_peers(s.io.get_executor(), std::move(endpoints), s.settings.heartbeat_timeout);
      if (!gone.empty()) {
        const NodeInfo& lost = *peers.at(gone.front());
        end = RoundEnd{EndKind::lost, lost.id, "node " + lost.describe() + " is gone: its agent does not answer"};
      }
      co_await s.requests_protocol.end_round(round.round, std::move(end));
      co_return;
    }
    case Request::Kind::end_round: {
      try {
        if (s.watched) co_await s.requests_protocol.end_round(s.watched->round, std::move(request.end));
      } catch (const StoreError&) {
        // The caller is leaving; what it could not say, the others learn from its heartbeat.
      }
      if (request.done) s.post(std::move(request.done));
      co_return;
    }
    case Request::Kind::mark_finished: {
      if (!s.watched) co_return;
      const RoundDecision round = *s.watched;
      co_await s.requests_protocol.mark_finished(round, s.self);
      co_return;
    }
  }
}

Task<void> NodeMembership::State::run_watcher(std::shared_ptr<State> self) {
  State& s = *self;
  int reported = -1;
  bool failed_once = false;
  for (;;) {
    while (!s.stopped && !(s.watched && s.watched->round != reported)) co_await s.next_change();
    if (s.stopped) co_return;
    const int round = s.watched->round;
    std::optional<std::string> failure;
    try {
      RoundEnd end = co_await s.watcher_protocol.wait_end(round, kEndWaitSlice);
      if (s.stopped) co_return;
      if (end.kind == EndKind::lost && end.node == s.self.id) end.message = s.dropped_message(end.message);
      failed_once = false;
      reported = round;
      s.post([&s, round, end] { s.events.on_round_end(round, end); });
    } catch (const StoreTimeout&) {
      // Re-arm.
    } catch (const StoreError& error) {
      // The connection broke (the store's host may be gone): the next call reconnects, retrying
      // for read_timeout; a second failure in a row means the store is lost.
      if (failed_once) failure = "lost the rendezvous store at " + s.address() + ": " + error.what();
      failed_once = true;
    } catch (const RendezvousError& error) {
      failure = error.what();
    }
    if (failure) co_return s.fail(*failure);
  }
}

Task<void> NodeMembership::State::run_keep_alive(std::shared_ptr<State> self) {
  State& s = *self;
  HeartbeatTracker tracker(s.settings.lost_after());
  std::int64_t counter = 0;
  int tracked_round = -1;
  int reported_round = -1;
  // The store failed or was slow to take this node's beat: it could not take the others' either
  // (an etcd leader election), so their silence meanwhile proves nothing.
  bool store_faltered = false;
  // After a beat the store did not take, the next is sent soon, not an interval later: the store's
  // silence counts from its first unanswered question (store_asked), so it must keep being asked
  // to be found answering again within read_timeout.
  bool beat_failed = false;
  for (;;) {
    if (s.stopped) co_return;  // before a whole interval's sleep
    // Idle until the first round forms (join() wrote the first heartbeat); then every interval.
    if (counter == 0) {
      while (!s.stopped && !s.watched) co_await s.next_change();
    } else {
      const auto pause = beat_failed ? std::min<std::chrono::nanoseconds>(s.settings.keep_alive_interval, kRetryBeatAfter)
                                     : std::chrono::nanoseconds(s.settings.keep_alive_interval);
      s.stall_watch.sleeping_until(Clock::now() + pause);
      s.beat_timer.expires_after(pause);
      co_await sleep_on(s.beat_timer);
    }
    beat_failed = false;
    if (s.stopped) co_return;
    const std::optional<StallWatch::Stall> stall = s.stall_watch.woke(Clock::now());
    const RoundDecision round = *s.watched;
    std::optional<std::string> failure;
    try {
      const auto began = Clock::now();
      s.store_asked();
      co_await s.keep_alive_protocol.beat(s.self.id, ++counter);
      // The counters read below are the store's as of this moment or later: judged as of now, a
      // stall of this agent inside the read cannot pass for the others' silence.
      const auto looked = Clock::now();
      if (looked - began > s.settings.keep_alive_interval) store_faltered = true;
      if (round.round != tracked_round) {
        std::vector<std::string> peers;
        for (const auto& node : round.nodes) {
          if (node.id != s.self.id) peers.push_back(node.id);
        }
        tracker.watch(peers, looked);
        tracked_round = round.round;
      }
      if (!tracker.watched().empty()) {
        const std::vector<std::int64_t> beats = co_await s.keep_alive_protocol.read_beats(tracker.watched());
        tracker.observe(beats, looked);
      }
      if (s.stopped) co_return;
      s.store_answered();
      if (store_faltered) {
        tracker.excuse_silence(looked);
        store_faltered = false;
      }
      auto lost = tracker.lost(looked);
      if (stall) {
        // This agent stood still; the others may have been unable to beat meanwhile (the store may
        // be this agent's): their silence so far proves nothing.
        tracker.excuse_silence(looked);
        const bool untold = s.stall_watch.claim_telling();
        if (untold || !lost.empty()) s.warn(describe_own_stall(stall->length(), describe_nodes(round, lost)));
        lost.clear();
      }
      if (!lost.empty() && reported_round != round.round) {
        reported_round = round.round;
        const NodeInfo& node = round.nodes.at(static_cast<std::size_t>(round.group_rank_of(lost.front())));
        RoundEnd end{EndKind::lost, node.id,
                     "node " + node.describe() + " stopped heart-beating (nothing for " +
                         describe_duration(s.settings.lost_after()) + ")"};
        co_await s.keep_alive_protocol.end_round(round.round, std::move(end));
      }
    } catch (const StoreError& error) {
      // A late or failed beat is a missed one; only a store silent for read_timeout is lost, which
      // store_silence tells on the agent's loop.
      s.last_store_error = error.what();
      store_faltered = true;
      beat_failed = true;
    } catch (const RendezvousError& error) {
      failure = error.what();
    }
    if (failure) co_return s.fail(*failure);
  }
}

NodeMembership::NodeMembership(asio::io_context& io, RendezvousSettings settings, Endpoint store,
                               std::optional<std::string> token, NodeInfo self, Events events)
    : NodeMembership(io, std::move(settings), tcp_store_factory(std::move(store), std::move(token)), std::move(self),
                     std::move(events)) {}

NodeMembership::NodeMembership(asio::io_context& io, RendezvousSettings settings, StoreFactory stores, NodeInfo self,
                               Events events)
    : state_(std::make_shared<State>(io, std::move(settings), std::move(stores), std::move(self), std::move(events))) {
  state_->begin_waiting();
  // An exception none of them handles (a bug) reaches the agent's loop, as a thread's once ended ddprun.
  auto rethrow = [](std::exception_ptr error) {
    if (error) std::rethrow_exception(error);
  };
  asio::co_spawn(io, State::run_requests(state_), rethrow);
  asio::co_spawn(io, State::run_watcher(state_), rethrow);
  asio::co_spawn(io, State::run_keep_alive(state_), rethrow);
}

NodeMembership::~NodeMembership() { state_->stop(); }

void NodeMembership::join(int store_port, int previous_rank) {
  // The first join's wait began with the connect (the constructor); a later one begins now.
  if (previous_rank >= 0) state_->begin_waiting();
  Request request;
  request.kind = Request::Kind::join;
  request.store_port = store_port;
  request.previous_rank = previous_rank;
  state_->requests.push_back(std::move(request));
  state_->notify();
}

void NodeMembership::watch(const RoundDecision& decision) {
  state_->watched = decision;
  state_->watched_since = Clock::now();
  state_->notify();
}

void NodeMembership::report_failure(RoundEnd failure) {
  Request request;
  request.kind = Request::Kind::report_failure;
  request.end = std::move(failure);
  state_->requests.push_back(std::move(request));
  state_->notify();
}

void NodeMembership::end_round(RoundEnd end, std::function<void()> done) {
  Request request;
  request.kind = Request::Kind::end_round;
  request.end = std::move(end);
  request.done = std::move(done);
  state_->requests.push_back(std::move(request));
  state_->notify();
}

void NodeMembership::mark_finished() {
  Request request;
  request.kind = Request::Kind::mark_finished;
  state_->requests.push_back(std::move(request));
  state_->notify();
}

const NodeInfo& NodeMembership::self() const { return state_->self; }

std::string NodeMembership::store_address() const { return state_->address(); }

const StoreFactory& NodeMembership::stores() const { return state_->stores; }

}  // namespace ddprun::rendezvous

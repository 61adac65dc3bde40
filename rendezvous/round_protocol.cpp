#include "rendezvous/round_protocol.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "rendezvous/deadline.hpp"  // describe_duration
#include "rendezvous/round_close_rule.hpp"
#include "rendezvous/store_error.hpp"

using std::chrono::milliseconds;

namespace ddprun::rendezvous {
namespace {

/// How long the closing node waits for a join slot whose node took it (ADD) but has not written its
/// record yet: the two are back to back, so only a node that died in between misses this.
constexpr milliseconds kSlotWriteGrace{2000};

std::optional<int> to_int(std::string_view text) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

/// A list of one key. GCC 12 miscompiles some co_await expressions (a braced list's array inside
/// one, an aggregate temporary as an argument, a co_await inside a condition): this file puts
/// each co_await's result into a variable first, passes named values, and builds lists with this.
std::vector<std::string> one(std::string key) { return std::vector<std::string>(1, std::move(key)); }

/// "a, b, c" one item at a time.
void append_listed(std::string& list, const std::string& item) {
  if (!list.empty()) list += ", ";
  list += item;
}

}  // namespace

RoundProtocol::RoundProtocol(Store& store, RendezvousSettings settings, ClockFn clock)
    : store_(store), settings_(std::move(settings)), keys_(settings_.run_id), clock_(or_steady_clock(std::move(clock))) {}

milliseconds RoundProtocol::left_until(SteadyTime deadline) const {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - now());
  return std::max(left, milliseconds(1));
}

Task<void> RoundProtocol::check_job(NodeInfo self) {
  const bool hosted_here = co_await store_.check(one(kHostedRunIdKey));
  if (hosted_here) {
    std::string hosted = co_await store_.get(kHostedRunIdKey, settings_.read_timeout);
    if (hosted != settings_.run_id) {
      throw RendezvousError("the store at " + store_.address() + " serves job '" + hosted + "', not '" +
                            settings_.run_id + "' (--rdzv-id): start every node of a job with the same " +
                            "--rdzv-id, and different jobs on different endpoints");
    }
  }
  const JobShape mine = job_shape_of(settings_, self);
  const std::string encoded = encode_job_shape(mine);
  const std::string recorded = co_await store_.compare_set(keys_.job_shape(), "", encoded);
  if (recorded == encoded) co_return;
  const JobShape stands = decode_job_shape(recorded);
  const std::string mismatch = job_shape_mismatch(stands, mine);
  if (mismatch.empty()) co_return;
  // A static job cannot form without this node: the others would wait out the timeout for it.
  if (stands.backend == RdzvBackend::static_) co_await fail_forming_round(stands, mismatch);
  throw RendezvousError(mismatch);
}

Task<void> RoundProtocol::fail_forming_round(JobShape job, std::string why) {
  const int round = co_await current_round();
  RoundDecision failed;
  failed.round = round;
  failed.error = why;
  const std::string mine = encode_decision(failed);
  // A round that formed runs on without this node; one failed by another node already woke its nodes.
  const std::string stands = co_await store_.compare_set(keys_.decision(round), "", mine);
  if (stands != mine) co_return;
  // Nodes with fewer than MIN in sleep on the MIN-th join slot, the others on the decision.
  co_await store_.compare_set(keys_.join_slot(round, job.min_nodes - 1), "", kClosedMarker);
}

Task<int> RoundProtocol::current_round() {
  std::string text = co_await store_.compare_set(keys_.current_round(), "", "0");
  auto round = to_int(text);
  if (!round || *round < 0) throw RendezvousError("malformed round number in the store: \"" + text + "\"");
  co_return *round;
}

Task<void> RoundProtocol::advance_past(int round) {
  co_await store_.compare_set(keys_.current_round(), std::to_string(round), std::to_string(round + 1));
}

Task<std::optional<RoundDecision>> RoundProtocol::read_decision(int round) {
  const bool decided = co_await store_.check(one(keys_.decision(round)));
  if (!decided) co_return std::nullopt;
  const std::string text = co_await store_.get(keys_.decision(round), settings_.read_timeout);
  co_return decode_decision(text);
}

Task<std::optional<RoundEnd>> RoundProtocol::read_end(int round) {
  const bool ended = co_await store_.check(one(keys_.end(round)));
  if (!ended) co_return std::nullopt;
  const std::string text = co_await store_.get(keys_.end(round), settings_.read_timeout);
  co_return decode_end(text);
}

Task<RoundDecision> RoundProtocol::join(NodeInfo self) {
  const auto deadline = now() + settings_.join_deadline();
  // Before the join slot: whoever reads this node's heartbeat finds the key.
  co_await store_.compare_set(keys_.heartbeat(self.id), "", "0");
  for (;;) {
    const int round = co_await current_round();
    // The round that ended the job moved the current round past itself: look back one.
    if (round > 0) {
      const auto previous = co_await read_end(round - 1);
      if (previous && ends_the_job(previous->kind)) throw_closed(round - 1, *previous);
    }
    const auto end = co_await read_end(round);
    if (end) {
      if (ends_the_job(end->kind)) throw_closed(round, *end);
      co_await advance_past(round);
      continue;
    }
    const auto running = co_await read_decision(round);
    if (running) {
      if (!running->error.empty()) throw RoundFailed(running->error);
      co_await wait_as_late_node(round, self, deadline);
      continue;
    }
    auto decision = co_await join_open_round(round, self, deadline);
    if (decision) {
      if (!decision->error.empty()) throw RoundFailed(decision->error);
      co_return std::move(*decision);  // a decision of N nodes: moved, not copied
    }
  }
}

Task<std::optional<RoundDecision>> RoundProtocol::join_open_round(int round, NodeInfo self, SteadyTime deadline) {
  const int min = settings_.min_nodes;
  const int max = settings_.max_nodes;
  if (settings_.is_static) co_await claim_static_rank(round, self);
  const std::int64_t joins = co_await store_.add(keys_.join_count(round), 1);
  const int slot = static_cast<int>(joins) - 1;
  if (slot >= max) {
    // The round is full: this node waits for it to close, then for its end (join() goes on).
    bool timed_out = false;
    try {
      co_await store_.wait(one(keys_.decision(round)), left_until(deadline));
    } catch (const StoreTimeout&) {
      timed_out = true;  // no co_await inside a handler
    }
    if (timed_out) {
      const std::string message = co_await join_timeout_message(round, max);
      throw RendezvousError(message);
    }
    co_return std::nullopt;
  }
  const std::string mine = encode_node(self);
  const std::string in_slot = co_await store_.compare_set(keys_.join_slot(round, slot), "", mine);
  if (in_slot != mine) co_return std::nullopt;  // the closed marker

  const Carried carried = co_await carried_into(round);
  CloseTimers timers;
  for (;;) {
    auto decision = co_await read_decision(round);
    if (decision) {
      if (decision->group_rank_of(self.id) >= 0 || !decision->error.empty()) co_return std::move(decision);
      co_return std::nullopt;
    }
    const std::int64_t taken = co_await store_.add(keys_.join_count(round), 0);
    const int count = std::min(static_cast<int>(taken), max);
    co_await report_progress(round, count);
    // The join records, read at most once per look: for the closing node, and to find out whether
    // every node expected back after a membership change is in.
    std::optional<std::vector<NodeInfo>> joined;
    RoundLook look;
    look.count = count;
    look.min_nodes = min;
    look.max_nodes = max;
    look.slot = slot;
    if (count >= min && expected_back_possible(count, max, carried.expected_ids.size())) {
      joined = co_await read_joins(round, count);
      look.expected_back = std::all_of(carried.expected_ids.begin(), carried.expected_ids.end(), [&](const std::string& id) {
        return std::any_of(joined->begin(), joined->end(), [&](const NodeInfo& n) { return n.id == id; });
      });
    }
    look.last_call_timeout = settings_.last_call_timeout;
    look.now = now();
    look.deadline = deadline;
    look.timers = timers;
    const CloseVerdict verdict = close_rule(look);
    timers = verdict.timers;
    if (verdict.close) {
      if (!joined) joined = co_await read_joins(round, count);
      if (static_cast<int>(joined->size()) >= min) {
        RoundDecision closed = co_await close(round, count, std::move(*joined), carried.restart_count);
        if (closed.group_rank_of(self.id) >= 0 || !closed.error.empty()) co_return std::move(closed);
        co_return std::nullopt;
      }
    }
    if (verdict.next == CloseVerdict::Next::time_out) {
      const std::string message = co_await join_timeout_message(round, count);
      throw RendezvousError(message);
    }
    // Sleep in the store until something can change the answer: the MIN-th join while fewer are
    // in, else the decision (a full round is closed by its last joiner), within the last call.
    // Someone waiting for news (on_join_progress) gets a look at least every progress interval.
    const auto wake = progress_ ? std::min(verdict.wake, now() + progress_interval_) : verdict.wake;
    try {
      if (verdict.next == CloseVerdict::Next::wait_for_min) {
        co_await store_.wait(one(keys_.join_slot(round, min - 1)), left_until(wake));
      } else {
        co_await store_.wait(one(keys_.decision(round)), left_until(wake));
      }
    } catch (const StoreTimeout&) {
      // A deadline of our own: the next look decides what it means.
    }
  }
}

Task<void> RoundProtocol::claim_static_rank(int round, NodeInfo self) {
  const std::string mine = encode_node(self);
  const std::string stands = co_await store_.compare_set(keys_.static_rank(round, self.static_rank), "", mine);
  if (stands == mine) co_return;
  const NodeInfo holder = decode_node(stands);
  if (holder.id == self.id) co_return;  // this node's own claim, from an earlier look at the round
  throw RendezvousError(rank_taken_message(self.static_rank, holder,
                                           "joined round " + std::to_string(round) + " of job '" + settings_.run_id + "' first"));
}

Task<std::vector<NodeInfo>> RoundProtocol::read_joins(int round, int count) {
  std::vector<std::string> slots;
  for (int i = 0; i < count; ++i) slots.push_back(keys_.join_slot(round, i));
  std::vector<std::string> values;
  bool every_slot_written = true;
  try {
    values = co_await store_.multi_get(slots, settings_.read_timeout);  // one round trip in the usual case
  } catch (const StoreTimeout&) {
    every_slot_written = false;
  }
  if (!every_slot_written) {
    // A node died between taking its slot and writing it: read the slots one by one, each with a
    // short grace, and leave that node out.
    values.clear();
    for (const auto& key : slots) {
      std::string value;
      try {
        value = co_await store_.get(key, kSlotWriteGrace);
      } catch (const StoreTimeout&) {
      }
      values.push_back(std::move(value));
    }
  }
  std::vector<NodeInfo> joined;
  for (const auto& value : values) {
    if (value.empty() || value == kClosedMarker) continue;
    joined.push_back(decode_node(value));
  }
  co_return joined;
}

Task<RoundProtocol::Carried> RoundProtocol::carried_into(int round) {
  Carried carried;
  if (round == 0) co_return carried;
  auto previous = co_await read_decision(round - 1);
  auto end = co_await read_end(round - 1);
  if (!previous || !end) co_return carried;
  carried.restart_count = previous->restart_count + (uses_a_restart(end->kind) ? 1 : 0);
  for (const auto& node : previous->nodes) {
    bool gone = (end->kind == EndKind::lost || end->kind == EndKind::left) && node.id == end->node;
    if (!gone) carried.expected_ids.push_back(node.id);
  }
  if (end->kind == EndKind::joined) carried.expected_ids.push_back(end->node);
  co_return carried;
}

Task<RoundDecision> RoundProtocol::close(int round, int count, std::vector<NodeInfo> joined, int restart_count) {
  std::string mine = encode_decision(decide_round(round, restart_count, joined, settings_.is_static));
  std::string stands = co_await store_.compare_set(keys_.decision(round), "", mine);
  // Turn away a node that took a slot but has not written it yet: it finds the marker there.
  for (int slot = count;; ++slot) {
    const std::string in_slot = co_await store_.compare_set(keys_.join_slot(round, slot), "", kClosedMarker);
    if (in_slot == kClosedMarker) break;
  }
  co_return decode_decision(stands);
}

Task<void> RoundProtocol::wait_as_late_node(int round, NodeInfo self, SteadyTime deadline) {
  auto decision = co_await read_decision(round);
  if (decision && !settings_.is_static && static_cast<int>(decision->nodes.size()) < settings_.max_nodes) {
    RoundEnd joined{EndKind::joined, self.id, "node " + self.describe() + " joined the job"};
    co_await end_round(round, std::move(joined));
    co_return;
  }
  // Full (or static, where a node comes back by rejoining): wait for the running round to end.
  // Static: a node of the round holds this node's --node-rank. While its heartbeat goes on, this
  // node is a duplicate; a silent one is a dead node that this node replaces once the round ends.
  const NodeInfo* holder = decision && settings_.is_static ? other_holder_of_rank(decision->nodes, self) : nullptr;
  std::int64_t holder_beat = -1;
  if (holder) {
    const std::vector<std::int64_t> beats = co_await read_beats(one(holder->id));
    holder_beat = beats.front();
  }
  for (;;) {
    auto wake = holder ? std::min(deadline, now() + settings_.keep_alive_interval) : deadline;
    try {
      co_await store_.wait(one(keys_.end(round)), left_until(wake));
      co_return;
    } catch (const StoreTimeout&) {
      // Below: the deadline, or a look at the holder's heartbeat.
    }
    if (now() >= deadline) {
      throw RendezvousError("round " + std::to_string(round) + " of job '" + settings_.run_id + "' has all " +
                            std::to_string(settings_.max_nodes) + " nodes it can take and ran for the whole " +
                            describe_duration(settings_.join_deadline()) + " this node waited for a place");
    }
    if (!holder) continue;
    const std::vector<std::int64_t> beats = co_await read_beats(one(holder->id));
    const std::int64_t beat = beats.front();
    if (beat >= 0 && beat != holder_beat) {
      throw RendezvousError(rank_taken_message(self.static_rank, *holder,
                                               "runs in round " + std::to_string(round) + " of job '" +
                                                   settings_.run_id + "' and is alive (its heartbeat goes on)"));
    }
  }
}

Task<RoundEnd> RoundProtocol::end_round(int round, RoundEnd end) {
  std::string stands = co_await store_.compare_set(keys_.end(round), "", encode_end(end));
  co_await advance_past(round);
  co_return decode_end(stands);
}

Task<RoundEnd> RoundProtocol::wait_end(int round, milliseconds timeout) {
  const std::string text = co_await store_.get(keys_.end(round), timeout);
  co_return decode_end(text);
}

Task<void> RoundProtocol::mark_finished(RoundDecision decision, NodeInfo self) {
  auto finished = co_await store_.add(keys_.finished_count(decision.round), 1);
  if (finished == static_cast<std::int64_t>(decision.nodes.size())) {
    RoundEnd end{EndKind::finished, self.id, "the last node to finish was " + self.describe()};
    co_await end_round(decision.round, std::move(end));
  }
}

Task<void> RoundProtocol::beat(std::string node_id, std::int64_t counter) {
  co_await store_.set(keys_.heartbeat(node_id), std::to_string(counter));
}

Task<std::vector<std::int64_t>> RoundProtocol::read_beats(std::vector<std::string> node_ids) {
  std::vector<std::string> keys;
  for (const auto& id : node_ids) keys.push_back(keys_.heartbeat(id));
  std::vector<std::int64_t> counters;
  // A key may be missing: on a store with leases (etcd-v3) a dead node's heartbeat vanishes.
  const std::vector<std::optional<std::string>> values = co_await store_.get_if_present(keys);
  for (const auto& value : values) {
    std::int64_t counter = -1;
    if (!value) {
      counters.push_back(-1);
      continue;
    }
    auto [ptr, ec] = std::from_chars(value->data(), value->data() + value->size(), counter);
    counters.push_back(ec == std::errc() && ptr == value->data() + value->size() ? counter : -1);
  }
  co_return counters;
}

void RoundProtocol::on_join_progress(std::function<void(const JoinProgress&)> report, milliseconds interval) {
  progress_ = std::move(report);
  progress_interval_ = interval;
}

Task<void> RoundProtocol::report_progress(int round, int count) {
  if (!progress_) co_return;
  JoinProgress progress;
  progress.stage = JoinProgress::Stage::joining;
  progress.is_static = settings_.is_static;
  progress.joined = count;
  progress.min_nodes = settings_.min_nodes;
  progress.max_nodes = settings_.max_nodes;
  if (settings_.is_static && count < settings_.max_nodes && settings_.max_nodes <= kNamedRanksUpTo) {
    // A node claims its rank just before it takes a join slot: a claimed rank is as good as joined.
    for (int rank = 0; rank < settings_.max_nodes; ++rank) {
      const bool claimed = co_await store_.check(one(keys_.static_rank(round, rank)));
      if (!claimed) progress.missing_ranks.push_back(rank);
    }
  }
  progress_(progress);
}

void RoundProtocol::throw_closed(int round, const RoundEnd& end) {
  throw RendezvousClosed("rendezvous closed: job '" + settings_.run_id + "' already " +
                         (end.kind == EndKind::finished ? "finished" : "failed") + " in round " +
                         std::to_string(round) + " (" + end.message + "); start it again with a new --rdzv-id");
}

Task<std::string> RoundProtocol::join_timeout_message(int round, int count) {
  std::vector<NodeInfo> joined = co_await read_joins(round, std::min(count, settings_.max_nodes));
  std::string names;
  for (const auto& node : joined) append_listed(names, node.describe());
  std::string missing;
  if (settings_.is_static) {
    std::set<int> ranks;
    for (const auto& node : joined) ranks.insert(node.static_rank);
    for (int rank = 0; rank < settings_.max_nodes; ++rank) {
      if (!ranks.contains(rank)) append_listed(missing, std::to_string(rank));
    }
    missing = "waiting for node rank(s) " + missing;
  } else {
    int short_by = settings_.min_nodes - static_cast<int>(joined.size());
    missing = "waiting for " + std::to_string(std::max(short_by, 1)) + " more node(s) (--nnodes=" +
              std::to_string(settings_.min_nodes) + ":" + std::to_string(settings_.max_nodes) + ")";
  }
  co_return "round " + std::to_string(round) + " of job '" + settings_.run_id + "' did not form within " +
      describe_duration(settings_.join_deadline()) + ": joined: " + (names.empty() ? "none" : names) + "; " + missing;
}

}  // namespace ddprun::rendezvous

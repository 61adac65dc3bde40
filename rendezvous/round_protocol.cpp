#include "rendezvous/round_protocol.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "rendezvous/deadline_socket.hpp"  // describe_duration

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace ddprun::rendezvous {
namespace {

/// How long the closing node waits for a join slot whose node took it (ADD) but has not written its
/// record yet: the two are back to back, so only a node that died in between misses this.
constexpr milliseconds kSlotWriteGrace{2000};
/// How long the other nodes leave a round that is due to close to its designated closer (the node
/// that completed it) before closing it themselves: only a closer that died makes them wait.
constexpr milliseconds kCloserGrace{2000};

std::optional<int> to_int(std::string_view text) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return value;
}

milliseconds left_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  return std::max(left, milliseconds(1));
}

/// "a, b, c" one item at a time.
void append_listed(std::string& list, const std::string& item) {
  if (!list.empty()) list += ", ";
  list += item;
}

}  // namespace

RoundProtocol::RoundProtocol(StoreClient& store, RendezvousSettings settings)
    : store_(store), settings_(std::move(settings)), keys_(settings_.run_id) {}

void RoundProtocol::check_job(const NodeInfo& self) {
  if (store_.check({kHostedRunIdKey})) {
    std::string hosted = store_.get(kHostedRunIdKey);
    if (hosted != settings_.run_id) {
      throw RendezvousError("the store at " + store_.address() + " serves job '" + hosted + "', not '" +
                            settings_.run_id + "' (--rdzv-id): start every node of a job with the same " +
                            "--rdzv-id, and different jobs on different endpoints");
    }
  }
  const JobShape mine = job_shape_of(settings_, self);
  const std::string encoded = encode_job_shape(mine);
  const std::string recorded = store_.compare_set(keys_.job_shape(), "", encoded);
  if (recorded == encoded) return;
  const JobShape stands = decode_job_shape(recorded);
  const std::string mismatch = job_shape_mismatch(stands, mine);
  if (mismatch.empty()) return;
  // A static job cannot form without this node: the others would wait out the timeout for it.
  if (stands.is_static) fail_forming_round(stands, mismatch);
  throw RendezvousError(mismatch);
}

void RoundProtocol::fail_forming_round(const JobShape& job, const std::string& why) {
  const int round = current_round();
  RoundDecision failed;
  failed.round = round;
  failed.error = why;
  const std::string mine = encode_decision(failed);
  // A round that formed runs on without this node; one failed by another node already woke its nodes.
  if (store_.compare_set(keys_.decision(round), "", mine) != mine) return;
  // Nodes with fewer than MIN in sleep on the MIN-th join slot, the others on the decision.
  store_.compare_set(keys_.join_slot(round, job.min_nodes - 1), "", kClosedMarker);
}

int RoundProtocol::current_round() {
  std::string text = store_.compare_set(keys_.current_round(), "", "0");
  auto round = to_int(text);
  if (!round || *round < 0) throw RendezvousError("malformed round number in the store: \"" + text + "\"");
  return *round;
}

void RoundProtocol::advance_past(int round) {
  store_.compare_set(keys_.current_round(), std::to_string(round), std::to_string(round + 1));
}

std::optional<RoundDecision> RoundProtocol::read_decision(int round) {
  if (!store_.check({keys_.decision(round)})) return std::nullopt;
  return decode_decision(store_.get(keys_.decision(round)));
}

std::optional<RoundEnd> RoundProtocol::read_end(int round) {
  if (!store_.check({keys_.end(round)})) return std::nullopt;
  return decode_end(store_.get(keys_.end(round)));
}

RoundDecision RoundProtocol::join(const NodeInfo& self) {
  const auto deadline = Clock::now() + settings_.join_deadline();
  // Before the join slot: whoever reads this node's heartbeat finds the key.
  store_.compare_set(keys_.heartbeat(self.id), "", "0");
  for (;;) {
    const int round = current_round();
    // The round that ended the job moved the current round past itself: look back one.
    if (round > 0) {
      if (auto previous = read_end(round - 1); previous && ends_the_job(previous->kind)) {
        throw_closed(round - 1, *previous);
      }
    }
    if (auto end = read_end(round)) {
      if (ends_the_job(end->kind)) throw_closed(round, *end);
      advance_past(round);
      continue;
    }
    if (auto decision = read_decision(round)) {
      if (!decision->error.empty()) throw RoundFailed(decision->error);
      wait_as_late_node(round, self, deadline);
      continue;
    }
    if (auto decision = join_open_round(round, self, deadline)) {
      if (!decision->error.empty()) throw RoundFailed(decision->error);
      return *decision;
    }
  }
}

std::optional<RoundDecision> RoundProtocol::join_open_round(int round, const NodeInfo& self,
                                                            Clock::time_point deadline) {
  const int min = settings_.min_nodes;
  const int max = settings_.max_nodes;
  if (settings_.is_static) claim_static_rank(round, self);
  const int slot = static_cast<int>(store_.add(keys_.join_count(round), 1)) - 1;
  if (slot >= max) {
    // The round is full: this node waits for it to close, then for its end (join() goes on).
    try {
      store_.wait({keys_.decision(round)}, left_until(deadline));
    } catch (const StoreTimeout&) {
      throw_join_timeout(round, max);
    }
    return std::nullopt;
  }
  const std::string mine = encode_node(self);
  if (store_.compare_set(keys_.join_slot(round, slot), "", mine) != mine) return std::nullopt;  // closed marker

  const Carried carried = carried_into(round);
  std::optional<Clock::time_point> last_call_end;
  std::optional<Clock::time_point> closer_grace_end;
  for (;;) {
    if (auto decision = read_decision(round)) {
      if (decision->group_rank_of(self.id) >= 0 || !decision->error.empty()) return decision;
      return std::nullopt;
    }
    const int count = std::min(static_cast<int>(store_.add(keys_.join_count(round), 0)), max);
    report_progress(round, count);
    if (count >= min) {
      // The round is due at once when it is full, or when every node expected back after a
      // membership change is in; else when the last call (counted from when this node saw MIN) is
      // over. One node closes it: the one whose join filled the round, or made MIN (it saw the last
      // call first), or found every expected node back. The others wait for its decision, and close
      // themselves only when it has not come within kCloserGrace: a round of N nodes then costs one
      // decision, not N of them (each reading N join records).
      std::optional<std::vector<NodeInfo>> joined;  // the join records, read at most once per look
      auto joins = [&]() -> const std::vector<NodeInfo>& {
        if (!joined) joined = read_joins(round, count);
        return *joined;
      };
      const bool full = count >= max;
      bool designated = full && slot == max - 1;
      bool expected_back = false;
      if (!full && !carried.expected_ids.empty() && count >= static_cast<int>(carried.expected_ids.size())) {
        expected_back = std::all_of(carried.expected_ids.begin(), carried.expected_ids.end(), [&](const std::string& id) {
          return std::any_of(joins().begin(), joins().end(), [&](const NodeInfo& n) { return n.id == id; });
        });
        designated = expected_back;
      }
      if (!last_call_end) last_call_end = Clock::now() + settings_.last_call_timeout;
      const bool last_call_over = Clock::now() >= *last_call_end;
      if (last_call_over && !full && !expected_back) designated = slot == min - 1;
      const bool due = full || expected_back || last_call_over;
      if (due && !designated && !closer_grace_end) closer_grace_end = Clock::now() + kCloserGrace;
      if (due && (designated || Clock::now() >= *closer_grace_end)) {
        if (static_cast<int>(joins().size()) >= min) {
          RoundDecision decision = close(round, count, joins(), carried.restart_count);
          if (decision.group_rank_of(self.id) >= 0 || !decision.error.empty()) return decision;
          return std::nullopt;
        }
      }
    }
    if (Clock::now() >= deadline) throw_join_timeout(round, count);
    // Sleep in the store until something can change the answer: the MIN-th join while fewer are
    // in, else the decision (a full round is closed by its last joiner), within the last call.
    // Someone waiting for news (on_join_progress) gets a look at least every progress interval.
    const auto look = progress_ ? std::min(deadline, Clock::now() + progress_interval_) : deadline;
    try {
      if (count < min) {
        store_.wait({keys_.join_slot(round, min - 1)}, left_until(look));
      } else {
        auto wake = std::min(closer_grace_end ? *closer_grace_end : *last_call_end, look);
        store_.wait({keys_.decision(round)}, left_until(wake));
      }
    } catch (const StoreTimeout&) {
      // A deadline of our own: the loop decides what it means.
    }
  }
}

void RoundProtocol::claim_static_rank(int round, const NodeInfo& self) {
  const std::string mine = encode_node(self);
  const std::string stands = store_.compare_set(keys_.static_rank(round, self.static_rank), "", mine);
  if (stands == mine) return;
  const NodeInfo holder = decode_node(stands);
  if (holder.id == self.id) return;  // this node's own claim, from an earlier look at the round
  throw RendezvousError(rank_taken_message(self.static_rank, holder,
                                           "joined round " + std::to_string(round) + " of job '" + settings_.run_id + "' first"));
}

std::vector<NodeInfo> RoundProtocol::read_joins(int round, int count) {
  std::vector<std::string> slots;
  for (int i = 0; i < count; ++i) slots.push_back(keys_.join_slot(round, i));
  std::vector<std::string> values;
  try {
    values = store_.multi_get(slots);  // one round trip in the usual case: every slot written
  } catch (const StoreTimeout&) {
    // A node died between taking its slot and writing it: read the slots one by one, each with a
    // short grace, and leave that node out.
    values.clear();
    for (const auto& key : slots) {
      try {
        values.push_back(store_.get(key, kSlotWriteGrace));
      } catch (const StoreTimeout&) {
        values.emplace_back();
      }
    }
  }
  std::vector<NodeInfo> joined;
  for (const auto& value : values) {
    if (value.empty() || value == kClosedMarker) continue;
    joined.push_back(decode_node(value));
  }
  return joined;
}

RoundProtocol::Carried RoundProtocol::carried_into(int round) {
  Carried carried;
  if (round == 0) return carried;
  auto previous = read_decision(round - 1);
  auto end = read_end(round - 1);
  if (!previous || !end) return carried;
  carried.restart_count = previous->restart_count + (uses_a_restart(end->kind) ? 1 : 0);
  for (const auto& node : previous->nodes) {
    bool gone = (end->kind == EndKind::lost || end->kind == EndKind::left) && node.id == end->node;
    if (!gone) carried.expected_ids.push_back(node.id);
  }
  if (end->kind == EndKind::joined) carried.expected_ids.push_back(end->node);
  return carried;
}

RoundDecision RoundProtocol::close(int round, int count, const std::vector<NodeInfo>& joined, int restart_count) {
  std::string mine = encode_decision(decide_round(round, restart_count, joined, settings_.is_static));
  std::string stands = store_.compare_set(keys_.decision(round), "", mine);
  // Turn away a node that took a slot but has not written it yet: it finds the marker there.
  for (int slot = count;; ++slot) {
    if (store_.compare_set(keys_.join_slot(round, slot), "", kClosedMarker) == kClosedMarker) break;
  }
  return decode_decision(stands);
}

void RoundProtocol::wait_as_late_node(int round, const NodeInfo& self, Clock::time_point deadline) {
  auto decision = read_decision(round);
  if (decision && !settings_.is_static && static_cast<int>(decision->nodes.size()) < settings_.max_nodes) {
    end_round(round, RoundEnd{EndKind::joined, self.id, "node " + self.describe() + " joined the job"});
    return;
  }
  // Full (or static, where a node comes back by rejoining): wait for the running round to end.
  // Static: a node of the round holds this node's --node-rank. While its heartbeat goes on, this
  // node is a duplicate; a silent one is a dead node that this node replaces once the round ends.
  const NodeInfo* holder = decision && settings_.is_static ? other_holder_of_rank(decision->nodes, self) : nullptr;
  const std::int64_t holder_beat = holder ? read_beats({holder->id}).front() : -1;
  for (;;) {
    auto wake = holder ? std::min(deadline, Clock::now() + settings_.keep_alive_interval) : deadline;
    try {
      store_.wait({keys_.end(round)}, left_until(wake));
      return;
    } catch (const StoreTimeout&) {
      if (Clock::now() >= deadline) {
        throw RendezvousError("round " + std::to_string(round) + " of job '" + settings_.run_id + "' has all " +
                              std::to_string(settings_.max_nodes) + " nodes it can take and ran for the whole " +
                              describe_duration(settings_.join_deadline()) + " this node waited for a place");
      }
    }
    if (!holder) continue;
    const std::int64_t beat = read_beats({holder->id}).front();
    if (beat >= 0 && beat != holder_beat) {
      throw RendezvousError(rank_taken_message(self.static_rank, *holder,
                                               "runs in round " + std::to_string(round) + " of job '" +
                                                   settings_.run_id + "' and is alive (its heartbeat goes on)"));
    }
  }
}

RoundEnd RoundProtocol::end_round(int round, const RoundEnd& end) {
  std::string stands = store_.compare_set(keys_.end(round), "", encode_end(end));
  advance_past(round);
  return decode_end(stands);
}

RoundEnd RoundProtocol::wait_end(int round, milliseconds timeout) {
  return decode_end(store_.get(keys_.end(round), timeout));
}

void RoundProtocol::mark_finished(const RoundDecision& decision, const NodeInfo& self) {
  auto finished = store_.add(keys_.finished_count(decision.round), 1);
  if (finished == static_cast<std::int64_t>(decision.nodes.size())) {
    end_round(decision.round, RoundEnd{EndKind::finished, self.id, "the last node to finish was " + self.describe()});
  }
}

void RoundProtocol::beat(const std::string& node_id, std::int64_t counter) {
  store_.set(keys_.heartbeat(node_id), std::to_string(counter));
}

std::vector<std::int64_t> RoundProtocol::read_beats(const std::vector<std::string>& node_ids) {
  std::vector<std::string> keys;
  for (const auto& id : node_ids) keys.push_back(keys_.heartbeat(id));
  std::vector<std::int64_t> counters;
  for (const auto& value : store_.multi_get(keys)) {
    std::int64_t counter = -1;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), counter);
    counters.push_back(ec == std::errc() && ptr == value.data() + value.size() ? counter : -1);
  }
  return counters;
}

void RoundProtocol::on_join_progress(std::function<void(const JoinProgress&)> report, milliseconds interval) {
  progress_ = std::move(report);
  progress_interval_ = interval;
}

void RoundProtocol::report_progress(int round, int count) {
  if (!progress_) return;
  JoinProgress progress;
  progress.stage = JoinProgress::Stage::joining;
  progress.is_static = settings_.is_static;
  progress.joined = count;
  progress.min_nodes = settings_.min_nodes;
  progress.max_nodes = settings_.max_nodes;
  if (settings_.is_static && count < settings_.max_nodes && settings_.max_nodes <= kNamedRanksUpTo) {
    // A node claims its rank just before it takes a join slot: a claimed rank is as good as joined.
    for (int rank = 0; rank < settings_.max_nodes; ++rank) {
      if (!store_.check({keys_.static_rank(round, rank)})) progress.missing_ranks.push_back(rank);
    }
  }
  progress_(progress);
}

void RoundProtocol::throw_closed(int round, const RoundEnd& end) {
  throw RendezvousClosed("rendezvous closed: job '" + settings_.run_id + "' already " +
                         (end.kind == EndKind::finished ? "finished" : "failed") + " in round " +
                         std::to_string(round) + " (" + end.message + "); start it again with a new --rdzv-id");
}

void RoundProtocol::throw_join_timeout(int round, int count) {
  std::vector<NodeInfo> joined = read_joins(round, std::min(count, settings_.max_nodes));
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
  throw RendezvousError("round " + std::to_string(round) + " of job '" + settings_.run_id + "' did not form within " +
                        describe_duration(settings_.join_deadline()) + ": joined: " + (names.empty() ? "none" : names) +
                        "; " + missing);
}

}  // namespace ddprun::rendezvous

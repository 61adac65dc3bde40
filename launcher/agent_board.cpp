// The Agent's job board (multi-node jobs): each round has a JobBoard on the rendezvous store
// (rendezvous/job_board.hpp). Each status sample publishes this node's status there (bounded,
// board_status.hpp), reads the other nodes' into a cache the status endpoint serves with this
// node's own fresh sample, and looks for a new stack request: a request asked of any agent
// (`ddprun stacks`, /api/stacks) is answered by every agent with its own ranks' stacks, and the
// asking agent serves them all.
//
// StatusSource::status() is synchronous: it serves the cache, refreshed from the board once a
// second, so another node's ranks are at most about two seconds old.
#include <algorithm>
#include <utility>
#include <boost/asio/post.hpp>

#include "launcher/agent.hpp"
#include "launcher/agent_support.hpp"
#include "launcher/observe/board_status.hpp"
#include "launcher/observe/capture_queue.hpp"
#include "launcher/observe/stack_capture.hpp"
#include "launcher/observe/stack_digest.hpp"
#include "launcher/observe/status_http.hpp"
#include "launcher/observe/status_json.hpp"
#include "launcher/observe/status_monitor.hpp"
#include "launcher/base/terminal_safe.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/job_board.hpp"
#include "rendezvous/node_membership.hpp"

namespace ddprun::launcher {
namespace {

/// How long the asking agent waits for every node's stacks (a node notices a request within a
/// sample, about a second, and captures its ranks in about two).
constexpr std::chrono::milliseconds kStacksWait{10000};

/// A wait for the other nodes' answers is cut into turns this long: the board runs its operations
/// one at a time, and an agent that waits for answers must still see the other nodes' requests
/// between turns (two nodes that ask at once each answer the other).
constexpr std::chrono::milliseconds kStacksWaitTurn{500};

/// Requests a node answers with one capture, the newest first: two nodes that find a hang at once
/// each ask, and each must get an answer, whichever request the answering node sees first.
constexpr std::int64_t kRequestsAnsweredAtOnce = 4;

/// The job's stacks: this node's `own` ranks and the other nodes' answers in `read`, one digest for
/// all, each node that did not answer a line of its own after it.
StacksReply job_stacks_reply(std::vector<RankStacks> own, const rendezvous::BoardRead& read, int self) {
  StacksReply reply;
  if (!read.error.empty()) {
    reply.error = "cannot read the nodes' stacks: " + read.error;
    return reply;
  }
  std::vector<std::string> missing;
  reply.ranks = std::move(own);
  for (std::size_t node = 0; node < read.entries.size(); ++node) {
    if (static_cast<int>(node) == self) continue;
    if (!read.entries[node]) {
      missing.push_back("node " + std::to_string(node) + ": no answer within " +
                        std::to_string(kStacksWait.count() / 1000) + " s");
      continue;
    }
    try {
      for (RankStacks& rank : board_stacks_from_json(*read.entries[node])) reply.ranks.push_back(std::move(rank));
    } catch (const nlohmann::json::exception&) {
      missing.push_back("node " + std::to_string(node) + ": an answer that is not stacks");
    }
  }
  std::sort(reply.ranks.begin(), reply.ranks.end(),
            [](const RankStacks& a, const RankStacks& b) { return a.rank < b.rank; });
  reply.digest = stack_digest(reply.ranks, read_source_line);
  reply.digest.insert(reply.digest.end(), missing.begin(), missing.end());
  return reply;
}

/// The step rates of the other nodes' running ranks, for the straggler rule's job-wide median. A
/// rate of 0 is left out: it is also what a rank shows before its second sample, and a rank that
/// stopped is the hang watch's matter, not a line to be slower than.
std::vector<double> peer_step_rates(const std::vector<NodeStatus>& others) {
  std::vector<double> rates;
  for (const NodeStatus& node : others) {
    for (const RankStatus& rank : node.ranks) {
      if (rank.state == RankState::running && rank.progress && rank.progress->steps_per_second > 0) {
        rates.push_back(rank.progress->steps_per_second);
      }
    }
  }
  return rates;
}

}  // namespace

void Agent::open_board(const rendezvous::RoundDecision& decision) {
  close_board();
  rendezvous::JobBoard::Options options;
  options.stores = membership_->stores();  // the rendezvous store's (a TCPStore or etcd-v3)
  options.run_id = plan_.config.rendezvous.run_id;
  board_ = std::make_unique<rendezvous::JobBoard>(io_, std::move(options));
  board_round_ = decision.round;
  board_nodes_ = static_cast<int>(decision.nodes.size());
  // The other nodes read this node's status whether or not anyone here looks: sample from now on.
  ensure_status_samples();
}

void Agent::close_board() {
  board_.reset();  // its handlers are never called after this
  board_reading_ = false;
  board_checking_ = false;
  board_others_.clear();
  if (monitor_) monitor_->set_peer_rates({});
  board_answered_ = 0;
  board_own_requests_.clear();
  // A hang's gather that dies with the board: the hang goes on without the other nodes' stacks.
  if (auto then = std::exchange(hang_gather_then_, nullptr)) boost::asio::post(io_, std::move(then));
  // Requests of the round that ended: the next round's board has other nodes, and they ask again.
  auto waiting = std::move(board_stacks_waiting_);
  board_stacks_waiting_.clear();
  if (!waiting.empty()) {
    StacksReply reply;
    reply.error = "the round ended while the stacks were being gathered; ask again";
    boost::asio::post(io_, [waiting = std::move(waiting), reply] {
      for (const auto& done : waiting) done(reply);
    });
  }
}

void Agent::board_sample(const NodeStatus& node) {
  if (!board_) return;
  const int round = board_round_;
  board_->publish_status(round, group_rank_, board_status_json(node));
  if (!board_reading_) {
    board_reading_ = true;
    board_->read_statuses(round, board_nodes_, [this](rendezvous::BoardRead read) {
      board_reading_ = false;
      if (!read.error.empty()) return;  // the cache stays as it was; the next sample reads again
      std::vector<NodeStatus> others;
      for (std::size_t i = 0; i < read.entries.size(); ++i) {
        if (static_cast<int>(i) == group_rank_ || !read.entries[i]) continue;
        try {
          others.push_back(node_status_from_json(nlohmann::json::parse(*read.entries[i])));
        } catch (const nlohmann::json::exception&) {
          // Not a status (another version's?): that node is left out, not the job.
        }
      }
      board_others_ = std::move(others);
      if (monitor_) monitor_->set_peer_rates(peer_step_rates(board_others_));
    });
  }
  if (!board_checking_) {
    board_checking_ = true;
    board_->latest_stack_request(round, [this](std::int64_t request, const std::string& error) {
      board_checking_ = false;
      if (error.empty() && request > board_answered_) answer_stack_request(request);
    });
  }
}

void Agent::add_board_nodes(JobStatus& job) const {
  if (!board_) return;
  for (const NodeStatus& node : board_others_) job.nodes.push_back(node);
  std::stable_sort(job.nodes.begin(), job.nodes.end(),
                   [](const NodeStatus& a, const NodeStatus& b) { return a.node_rank < b.node_rank; });
}

void Agent::capture_own_stacks(std::function<void(std::vector<RankStacks>)> done) {
  std::vector<StackTarget> targets;
  if (monitor_) targets = stack_targets(monitor_->latest());
  captures().on_demand(std::move(targets), [done](const std::vector<CapturedRank>& ranks) {
    std::vector<RankStacks> stacks;
    for (const CapturedRank& rank : ranks) stacks.push_back(rank.stacks);
    done(std::move(stacks));
  });
}

void Agent::answer_stack_request(std::int64_t latest) {
  if (!board_) return;
  const int round = board_round_;
  // Every request since the last one answered, but this node's own (its asker has its ranks at hand).
  std::vector<std::int64_t> requests;
  for (std::int64_t request = std::max(board_answered_ + 1, latest - kRequestsAnsweredAtOnce + 1); request <= latest;
       ++request) {
    if (std::find(board_own_requests_.begin(), board_own_requests_.end(), request) == board_own_requests_.end()) {
      requests.push_back(request);
    }
  }
  board_answered_ = latest;
  std::erase_if(board_own_requests_, [latest](std::int64_t request) { return request <= latest; });
  if (requests.empty()) return;
  capture_own_stacks([this, round, requests](std::vector<RankStacks> stacks) {
    if (!board_ || board_round_ != round) return;  // the round (and its board) ended meanwhile
    const std::string bytes = board_stacks_json(std::move(stacks));
    for (std::int64_t request : requests) board_->publish_stacks(round, request, group_rank_, bytes);
  });
}

/// What the asking agent gathers: its own ranks (captured here, not through the board, whose
/// operations run in order behind the read that waits for the others) and the others' answers.
struct BoardGather {
  std::optional<std::vector<RankStacks>> own;
  std::optional<rendezvous::BoardRead> read;
};

void Agent::board_stacks(std::function<void(StacksReply)> done) {
  board_stacks_waiting_.push_back(std::move(done));
  if (board_stacks_waiting_.size() > 1) return;  // the request under way answers this one too
  const int round = board_round_;
  auto gather = std::make_shared<BoardGather>();
  auto finish = [this, gather] {
    if (!gather->own || !gather->read) return;
    StacksReply reply = job_stacks_reply(std::move(*gather->own), *gather->read, group_rank_);
    auto waiting = std::move(board_stacks_waiting_);
    board_stacks_waiting_.clear();
    for (const auto& waiter : waiting) waiter(reply);  // in a handler already: never inside board_stacks
  };
  board_->request_stacks(round, [this, round, gather, finish](std::int64_t request, const std::string& error) {
    if (request <= 0) {
      gather->own.emplace();
      gather->read.emplace(rendezvous::BoardRead{{}, "cannot ask the other nodes for their stacks: " + error});
      return finish();
    }
    board_own_requests_.push_back(request);  // this node answers here, not on the board
    capture_own_stacks([gather, finish](std::vector<RankStacks> stacks) {
      gather->own = std::move(stacks);
      finish();
    });
    read_other_stacks(round, request, [gather, finish](rendezvous::BoardRead read) {
      gather->read = std::move(read);
      finish();
    });
  });
}

bool Agent::gather_hang_stacks(std::vector<RankStacks> own, std::function<void()> then) {
  if (!board_ || board_nodes_ < 2) return false;
  const int round = board_round_;
  hang_gather_then_ = std::move(then);
  auto own_ranks = std::make_shared<std::vector<RankStacks>>(std::move(own));
  board_->request_stacks(round, [this, round, own_ranks](std::int64_t request, const std::string& error) {
    if (request <= 0) {
      print_line("hang: cannot ask the other nodes for their stacks: " + error);
      return finish_hang_gather();
    }
    board_own_requests_.push_back(request);  // this node's ranks are the hang's own capture
    read_other_stacks(round, request, [this, own_ranks](rendezvous::BoardRead read) {
      const StacksReply reply = job_stacks_reply(std::move(*own_ranks), read, group_rank_);
      if (!reply.error.empty()) {
        print_line("hang: " + terminal_safe(reply.error));
      } else {
        print_line("hang: the whole job (" + std::to_string(board_nodes_) + " nodes):");
        for (const std::string& line : reply.digest) print_line("hang:   " + terminal_safe(line));
        hang_digest_ = reply.digest;  // the failure summary shows the whole job's
      }
      finish_hang_gather();
    });
  });
  return true;
}

void Agent::read_other_stacks(int round, std::int64_t request, std::function<void(rendezvous::BoardRead)> done) {
  const auto deadline = std::chrono::steady_clock::now() + kStacksWait;
  auto turn = std::make_shared<std::function<void()>>();
  *turn = [this, round, request, deadline, done = std::move(done), turn] {
    if (!board_ || board_round_ != round) return;  // the board is gone: its waiters were told
    board_->read_stacks(round, request, board_nodes_, group_rank_, kStacksWaitTurn,
                        [this, deadline, done, turn](rendezvous::BoardRead read) {
                          bool all = read.error.empty();
                          for (std::size_t node = 0; all && node < read.entries.size(); ++node) {
                            all = static_cast<int>(node) == group_rank_ || read.entries[node].has_value();
                          }
                          if (all || !read.error.empty() || std::chrono::steady_clock::now() >= deadline) {
                            auto finished = std::move(done);
                            *turn = nullptr;  // the cycle through the shared function ends here
                            return finished(std::move(read));
                          }
                          (*turn)();  // behind whatever the board queued meanwhile (a request check)
                        });
  };
  (*turn)();
}

void Agent::finish_hang_gather() {
  if (auto then = std::exchange(hang_gather_then_, nullptr)) then();
}

}  // namespace ddprun::launcher

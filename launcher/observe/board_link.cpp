#include "launcher/observe/board_link.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <utility>

#include "common/bounded_json.hpp"
#include "launcher/observe/board_status.hpp"
#include "launcher/observe/node_stacks.hpp"
#include "launcher/observe/stack_capture.hpp"
#include "launcher/observe/stack_digest.hpp"
#include "launcher/observe/status_json.hpp"
#include "launcher/observe/status_monitor.hpp"
#include "launcher/observe/status_watch.hpp"

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

BoardLink::BoardLink(boost::asio::io_context& io, std::string run_id, const AttemptView& attempt, StatusWatch& status,
                     NodeStacks& stacks)
    : io_(io), run_id_(std::move(run_id)), attempt_(attempt), status_(status), stacks_(stacks) {}

BoardLink::~BoardLink() = default;

void BoardLink::open(int round, int nodes, rendezvous::StoreFactory stores) {
  close();
  rendezvous::JobBoard::Options options;
  options.stores = std::move(stores);  // the rendezvous store's (a TCPStore or etcd-v3)
  options.run_id = run_id_;
  board_ = std::make_unique<rendezvous::JobBoard>(io_, std::move(options));
  round_ = round;
  nodes_ = nodes;
  // The other nodes read this node's status whether or not anyone here looks: sample from now on.
  status_.ensure_samples();
}

void BoardLink::close() {
  board_.reset();  // its handlers are never called after this
  reading_ = false;
  checking_ = false;
  others_.clear();
  if (StatusMonitor* monitor = status_.monitor()) monitor->set_peer_rates({});
  answered_ = 0;
  own_requests_.clear();
  // A hang's gather that dies with the board: the hang goes on without the other nodes' stacks.
  if (auto done = std::exchange(hang_gather_done_, nullptr)) {
    boost::asio::post(io_, [done = std::move(done)] { done(std::nullopt); });
  }
  // Requests of the round that ended: the next round's board has other nodes, and they ask again.
  auto waiting = std::move(stacks_waiting_);
  stacks_waiting_.clear();
  if (!waiting.empty()) {
    StacksReply reply;
    reply.error = "the round ended while the stacks were being gathered; ask again";
    boost::asio::post(io_, [waiting = std::move(waiting), reply] {
      for (const auto& done : waiting) done(reply);
    });
  }
}

void BoardLink::on_sample(const NodeStatus& node) {
  if (!board_) return;
  const int round = round_;
  const int self = attempt_.group_rank;
  board_->publish_status(round, self, board_status_json(node));
  if (!reading_) {
    reading_ = true;
    board_->read_statuses(round, nodes_, [this, self](rendezvous::BoardRead read) {
      reading_ = false;
      if (!read.error.empty()) return;  // the cache stays as it was; the next sample reads again
      std::vector<NodeStatus> others;
      for (std::size_t i = 0; i < read.entries.size(); ++i) {
        if (static_cast<int>(i) == self || !read.entries[i]) continue;
        try {
          others.push_back(node_status_from_json(common::parse_bounded_json(*read.entries[i])));
        } catch (const nlohmann::json::exception&) {
          // Not a status (another version's?): that node is left out, not the job.
        }
      }
      others_ = std::move(others);
      if (StatusMonitor* monitor = status_.monitor()) monitor->set_peer_rates(peer_step_rates(others_));
    });
  }
  if (!checking_) {
    checking_ = true;
    board_->latest_stack_request(round, [this](std::int64_t request, const std::string& error) {
      checking_ = false;
      if (error.empty() && request > answered_) answer_stack_request(request);
    });
  }
}

void BoardLink::add_nodes(JobStatus& job) const {
  if (!board_) return;
  for (const NodeStatus& node : others_) job.nodes.push_back(node);
  std::stable_sort(job.nodes.begin(), job.nodes.end(),
                   [](const NodeStatus& a, const NodeStatus& b) { return a.node_rank < b.node_rank; });
}

void BoardLink::answer_stack_request(std::int64_t latest) {
  if (!board_) return;
  const int round = round_;
  // Every request since the last one answered, but this node's own (its asker has its ranks at hand).
  std::vector<std::int64_t> requests;
  for (std::int64_t request = std::max(answered_ + 1, latest - kRequestsAnsweredAtOnce + 1); request <= latest;
       ++request) {
    if (std::find(own_requests_.begin(), own_requests_.end(), request) == own_requests_.end()) {
      requests.push_back(request);
    }
  }
  answered_ = latest;
  std::erase_if(own_requests_, [latest](std::int64_t request) { return request <= latest; });
  if (requests.empty()) return;
  stacks_.capture(status_.latest(), [this, round, requests](std::vector<RankStacks> stacks) {
    if (!board_ || round_ != round) return;  // the round (and its board) ended meanwhile
    const std::string bytes = board_stacks_json(std::move(stacks));
    for (std::int64_t request : requests) board_->publish_stacks(round, request, attempt_.group_rank, bytes);
  });
}

namespace {

/// What the asking agent gathers: its own ranks (captured here, not through the board, whose
/// operations run in order behind the read that waits for the others) and the others' answers.
struct BoardGather {
  std::optional<std::vector<RankStacks>> own;
  std::optional<rendezvous::BoardRead> read;
};

}  // namespace

void BoardLink::stacks(std::function<void(StacksReply)> done) {
  stacks_waiting_.push_back(std::move(done));
  if (stacks_waiting_.size() > 1) return;  // the request under way answers this one too
  const int round = round_;
  auto gather = std::make_shared<BoardGather>();
  auto finish = [this, gather] {
    if (!gather->own || !gather->read) return;
    StacksReply reply = job_stacks_reply(std::move(*gather->own), *gather->read, attempt_.group_rank);
    auto waiting = std::move(stacks_waiting_);
    stacks_waiting_.clear();
    for (const auto& waiter : waiting) waiter(reply);  // in a handler already: never inside stacks()
  };
  board_->request_stacks(round, [this, round, gather, finish](std::int64_t request, const std::string& error) {
    if (request <= 0) {
      gather->own.emplace();
      gather->read.emplace(rendezvous::BoardRead{{}, "cannot ask the other nodes for their stacks: " + error});
      return finish();
    }
    own_requests_.push_back(request);  // this node answers here, not on the board
    stacks_.capture(status_.latest(), [gather, finish](std::vector<RankStacks> stacks) {
      gather->own = std::move(stacks);
      finish();
    });
    read_other_stacks(round, request, [gather, finish](rendezvous::BoardRead read) {
      gather->read = std::move(read);
      finish();
    });
  });
}

bool BoardLink::gather_hang_stacks(std::vector<RankStacks> own, std::function<void(std::optional<StacksReply>)> done) {
  if (!board_ || nodes_ < 2) return false;
  const int round = round_;
  hang_gather_done_ = std::move(done);
  auto own_ranks = std::make_shared<std::vector<RankStacks>>(std::move(own));
  auto finish = [this](StacksReply reply) {
    if (auto pending = std::exchange(hang_gather_done_, nullptr)) pending(std::move(reply));
  };
  board_->request_stacks(round, [this, round, own_ranks, finish](std::int64_t request, const std::string& error) {
    if (request <= 0) {
      StacksReply failed;
      failed.error = "cannot ask the other nodes for their stacks: " + error;
      return finish(std::move(failed));
    }
    own_requests_.push_back(request);  // this node's ranks are the hang's own capture
    read_other_stacks(round, request, [this, own_ranks, finish](rendezvous::BoardRead read) {
      finish(job_stacks_reply(std::move(*own_ranks), read, attempt_.group_rank));
    });
  });
  return true;
}

void BoardLink::read_other_stacks(int round, std::int64_t request, std::function<void(rendezvous::BoardRead)> done) {
  const auto deadline = std::chrono::steady_clock::now() + kStacksWait;
  auto turn = std::make_shared<std::function<void()>>();
  *turn = [this, round, request, deadline, done = std::move(done), turn] {
    if (!board_ || round_ != round) return;  // the board is gone: its waiters were told
    const int self = attempt_.group_rank;
    board_->read_stacks(round, request, nodes_, self, kStacksWaitTurn,
                        [self, deadline, done, turn](rendezvous::BoardRead read) {
                          bool all = read.error.empty();
                          for (std::size_t node = 0; all && node < read.entries.size(); ++node) {
                            all = static_cast<int>(node) == self || read.entries[node].has_value();
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

}  // namespace ddprun::launcher

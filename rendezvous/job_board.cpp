#include "rendezvous/job_board.hpp"

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/co_spawn.hpp>
#include <deque>

#include "rendezvous/store_factory.hpp"
#include "rendezvous/store_error.hpp"

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace ddprun::rendezvous {
namespace {

std::unique_ptr<Store> open_store(asio::io_context& io, const JobBoard::Options& options) {
  // The store is up when the board is used (a round formed on it): a short connect is enough.
  StoreFactory stores = options.stores ? *options.stores : tcp_store_factory(options.store, options.token);
  return stores.open(io.get_executor(), options.timeout, options.timeout);
}

}  // namespace

class JobBoard::State : public std::enable_shared_from_this<State> {
 public:
  /// One queued operation. A status publish keeps its key and bytes apart so that a later publish
  /// of the same key can replace them while it waits (latest wins).
  struct Operation {
    std::string publish_key;                 ///< non-empty: a status publish
    std::string bytes;
    std::function<void(std::string)> published;
    std::function<Task<void>(std::shared_ptr<State>)> run;  ///< everything else
  };

  State(asio::io_context& io_context, Options board_options)
      : io(io_context),
        options(std::move(board_options)),
        prefix("ddprun/rdzv/" + options.run_id + "/board/"),
        client(open_store(io, options)) {}

  void enqueue(Operation operation) {
    queue.push_back(std::move(operation));
    if (running) return;
    running = true;
    // An exception an operation does not handle (a bug) reaches the agent's loop.
    asio::co_spawn(io, drain(shared_from_this()), [](std::exception_ptr error) {
      if (error) std::rethrow_exception(error);
    });
  }

  std::size_t pending_reads() const {
    std::size_t reads = 0;
    for (const auto& operation : queue) reads += operation.publish_key.empty() ? 1 : 0;
    return reads;
  }

  static Task<void> drain(std::shared_ptr<State> self) {
    while (!self->stopped && !self->queue.empty()) {
      Operation operation = std::move(self->queue.front());
      self->queue.pop_front();
      if (operation.publish_key.empty()) {
        co_await operation.run(self);
      } else {
        co_await publish(self, std::move(operation));
      }
    }
    self->running = false;
  }

  static Task<void> publish(std::shared_ptr<State> self, Operation operation) {
    std::string error;
    try {
      co_await self->client->set(operation.publish_key, std::move(operation.bytes));
    } catch (const Error& failure) {
      error = failure.what();
    }
    if (!self->stopped && operation.published) operation.published(error);
  }

  /// The values of `keys` as they are now: one CHECK and one MULTI_GET when all exist, else a CHECK
  /// and a GET for each key that does.
  static Task<BoardEntries> read_now(std::shared_ptr<State> self, std::vector<std::string> keys) {
    BoardEntries entries(keys.size());
    bool all = co_await self->client->check(keys);
    if (all) {
      auto values = co_await self->client->multi_get(keys, self->options.timeout);
      for (std::size_t i = 0; i < values.size(); ++i) entries[i] = std::move(values[i]);
      co_return entries;
    }
    for (std::size_t i = 0; i < keys.size() && !self->stopped; ++i) {
      std::vector<std::string> one{keys[i]};  // not a braced list in the co_await (GCC 12)
      bool present = co_await self->client->check(std::move(one));
      if (present) entries[i] = co_await self->client->get(keys[i], self->options.timeout);
    }
    co_return entries;
  }

  asio::io_context& io;
  const Options options;
  const std::string prefix;
  std::unique_ptr<Store> client;  ///< one operation at a time
  std::deque<Operation> queue;
  bool running = false;
  /// Set by the board's destructor: what the loop resumes afterwards only winds down.
  bool stopped = false;
};

JobBoard::JobBoard(asio::io_context& io, Options options)
    : state_(std::make_shared<State>(io, std::move(options))) {}

JobBoard::~JobBoard() {
  state_->stopped = true;
  state_->queue.clear();
  state_->client->cancel();
}

std::string JobBoard::status_key(int round, int node) const {
  return state_->prefix + std::to_string(round) + "/status/" + std::to_string(node);
}
std::string JobBoard::stack_request_key(int round) const {
  return state_->prefix + std::to_string(round) + "/stack_requests";
}
std::string JobBoard::stacks_key(int round, std::int64_t request, int node) const {
  return state_->prefix + std::to_string(round) + "/stacks/" + std::to_string(request) + "/" + std::to_string(node);
}

namespace {
std::string too_large(std::size_t size, std::size_t limit) {
  return "the value is " + std::to_string(size) + " bytes, over the board's limit of " + std::to_string(limit);
}
}  // namespace

void JobBoard::publish_status(int round, int node, std::string bytes, std::function<void(std::string)> done) {
  const auto limit = state_->options.max_value_bytes;
  if (bytes.size() > limit) {
    if (done) asio::post(state_->io, [state = state_, done, error = too_large(bytes.size(), limit)] {
      if (!state->stopped) done(error);
    });
    return;
  }
  std::string key = status_key(round, node);
  for (auto& queued : state_->queue) {
    if (queued.publish_key != key) continue;
    // Latest wins: the queued publish takes the new bytes; its old caller hears it was replaced.
    if (queued.published) asio::post(state_->io, [state = state_, replaced = std::move(queued.published)] {
      if (!state->stopped) replaced("replaced");
    });
    queued.bytes = std::move(bytes);
    queued.published = std::move(done);
    return;
  }
  state_->enqueue({std::move(key), std::move(bytes), std::move(done), {}});
}

namespace {

/// Runs a read-like operation `body` on the board's connection; `done` gets its result or the error.
template <typename Result, typename Body, typename Done>
void enqueue_read(const std::shared_ptr<JobBoard::State>& state, Body body, Done done, Result refused) {
  if (state->pending_reads() >= JobBoard::kMaxPendingReads) {
    asio::post(state->io, [state, done, refused] {
      if (!state->stopped) done(refused, "the board has " + std::to_string(JobBoard::kMaxPendingReads) +
                                             " reads waiting already; try again");
    });
    return;
  }
  JobBoard::State::Operation operation;
  operation.run = [body = std::move(body), done = std::move(done), refused](
                      std::shared_ptr<JobBoard::State> self) -> Task<void> {
    Result result = refused;
    std::string error;
    try {
      result = co_await body(self);
    } catch (const Error& failure) {
      error = failure.what();
    }
    if (!self->stopped) done(std::move(result), std::move(error));
  };
  state->enqueue(std::move(operation));
}

}  // namespace

void JobBoard::read_statuses(int round, int nodes, std::function<void(BoardRead)> done) {
  std::vector<std::string> keys;
  for (int node = 0; node < nodes; ++node) keys.push_back(status_key(round, node));
  enqueue_read<BoardEntries>(
      state_,
      [keys](std::shared_ptr<State> self) -> Task<BoardEntries> { co_return co_await State::read_now(self, keys); },
      [done = std::move(done)](BoardEntries entries, std::string error) {
        done(BoardRead{std::move(entries), std::move(error)});
      },
      BoardEntries{});
}

void JobBoard::request_stacks(int round, std::function<void(std::int64_t, std::string)> done) {
  enqueue_read<std::int64_t>(
      state_,
      [key = stack_request_key(round)](std::shared_ptr<State> self) -> Task<std::int64_t> {
        co_return co_await self->client->add(key, 1);
      },
      std::move(done), std::int64_t{0});
}

void JobBoard::latest_stack_request(int round, std::function<void(std::int64_t, std::string)> done) {
  enqueue_read<std::int64_t>(
      state_,
      [key = stack_request_key(round)](std::shared_ptr<State> self) -> Task<std::int64_t> {
        co_return co_await self->client->add(key, 0);
      },
      std::move(done), std::int64_t{0});
}

void JobBoard::publish_stacks(int round, std::int64_t request, int node, std::string bytes,
                              std::function<void(std::string)> done) {
  auto report = [done = std::move(done)](bool, std::string error) {
    if (done) done(std::move(error));
  };
  const auto limit = state_->options.max_value_bytes;
  if (bytes.size() > limit) {
    asio::post(state_->io, [state = state_, report, error = too_large(bytes.size(), limit)] {
      if (!state->stopped) report(false, error);
    });
    return;
  }
  enqueue_read<bool>(
      state_,
      [key = stacks_key(round, request, node), bytes = std::move(bytes)](std::shared_ptr<State> self) -> Task<bool> {
        co_await self->client->set(key, bytes);
        co_return true;
      },
      std::move(report), false);
}

void JobBoard::read_stacks(int round, std::int64_t request, int nodes, int asker, milliseconds wait,
                           std::function<void(BoardRead)> done) {
  std::vector<std::string> keys;  // the answering nodes' keys, in node order
  std::vector<int> answering;
  for (int node = 0; node < nodes; ++node) {
    if (node == asker) continue;
    keys.push_back(stacks_key(round, request, node));
    answering.push_back(node);
  }
  enqueue_read<BoardEntries>(
      state_,
      [keys, wait](std::shared_ptr<State> self) -> Task<BoardEntries> {
        if (keys.empty()) co_return BoardEntries{};
        try {
          co_await self->client->wait(keys, wait);
        } catch (const StoreTimeout&) {
          // Some node did not answer in time: give what the others said.
        }
        co_return co_await State::read_now(self, keys);
      },
      [done = std::move(done), answering, nodes](BoardEntries answers, std::string error) {
        BoardEntries entries(error.empty() ? static_cast<std::size_t>(nodes) : 0);
        for (std::size_t i = 0; i < answers.size() && i < answering.size(); ++i) {
          entries[static_cast<std::size_t>(answering[i])] = std::move(answers[i]);
        }
        done(BoardRead{std::move(entries), std::move(error)});
      },
      BoardEntries{});
}

}  // namespace ddprun::rendezvous

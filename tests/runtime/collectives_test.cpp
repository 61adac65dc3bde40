// Every collective x element type x reduction, at world sizes 1 to 4, on the gloo backend: real
// processes (fork), real sockets on loopback, the store hosted by rank 0 in-process or by a separate
// "agent" process. Each rank checks its results against a reference it computes locally and reports
// through its exit status; the inputs are small integers, so every result is exact in every type
// and the checks compare bits, not tolerances.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../support/fork_ranks.hpp"
#include "../support/free_port.hpp"
#include "ddprun/error.hpp"
#include "ddprun/process_group.hpp"
#include "rendezvous/store_server.hpp"

namespace {

using namespace std::chrono_literals;
using ddprun::Buffer;
using ddprun::DataType;
using ddprun::ProcessGroup;
using ddprun::ReduceOp;

// ---- processes --------------------------------------------------------------------------------

using ddprun::testing::free_port;

/// The launcher's agent, played by a child process that serves the store until killed (the test
/// process itself stays single-threaded, so that forking it is safe). Returns its pid and port.
std::pair<pid_t, int> start_agent_store() {
  int fds[2];
  if (::pipe(fds) != 0) return {-1, 0};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ddprun::rendezvous::StoreServer server(ddprun::rendezvous::StoreServerOptions{});
    server.start();
    int port = server.port();
    if (::write(fds[1], &port, sizeof port) != sizeof port) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(fds[1]);
  int port = 0;
  if (::read(fds[0], &port, sizeof port) != sizeof port) port = 0;
  ::close(fds[0]);
  return {pid, port};
}

/// Forks `world` ranks that each create a gloo group and run `body`; returns how many ranks failed
/// (a failed check, an exception, a crash, or still running after the deadline). `body` returns the
/// number of failed checks and prints what failed.
using Body = std::function<int(ProcessGroup&, const ddprun::Identity&)>;
int run_world(int world, bool agent_store, const Body& body) {
  pid_t agent = -1;
  int port = 0;
  if (agent_store) {
    std::tie(agent, port) = start_agent_store();
    if (port == 0) return world;
  } else {
    port = free_port();
  }
  const int failed = ddprun::testing::count_failed(ddprun::testing::fork_ranks(
      world,
      [&](int rank) {
        ddprun::Identity identity;
        identity.rank = rank;
        identity.world_size = world;
        identity.local_rank = rank;
        identity.local_world_size = world;
        identity.master_addr = "127.0.0.1";
        identity.master_port = port;
        identity.agent_store = agent_store;
        ddprun::ProcessGroupOptions options;
        options.backend = ddprun::Backend::gloo;
        options.timeout = 60s;
        auto group = ProcessGroup::create(identity, options);
        return body(*group, identity) == 0 ? 0 : 1;
      },
      240s));
  if (agent > 0) {
    ::kill(agent, SIGKILL);
    ::waitpid(agent, nullptr, 0);
  }
  return failed;
}

// ---- values and references ------------------------------------------------------------------

constexpr DataType kTypes[] = {DataType::float32, DataType::float64, DataType::bfloat16,
                               DataType::float16, DataType::int32,   DataType::int64};
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max, ReduceOp::product};

/// Rank `rank`'s element `index` of input `seed`: a small integer, so sums (|x| <= 16) and products
/// (|x| <= 16) of up to four ranks are exact in every type, bfloat16 included, in any order.
std::int64_t input_value(int rank, std::size_t index, int seed, ReduceOp op) {
  if (op == ReduceOp::product) return static_cast<std::int64_t>((rank + index + seed) % 5) - 2;
  return static_cast<std::int64_t>((rank * 7 + index * 3 + seed) % 9) - 4;
}

/// Typed storage for `count` elements of `type` (8 bytes each at most).
struct Values {
  DataType type;
  std::vector<std::uint64_t> storage;
  std::size_t count;
  Values(DataType t, std::size_t n) : type(t), storage(n + 1), count(n) {}
  Buffer buffer() { return Buffer{storage.data(), count, type}; }
  Buffer block(std::size_t index, std::size_t block_count) {
    auto* bytes = reinterpret_cast<char*>(storage.data()) + index * block_count * ddprun::size_of(type);
    return Buffer{bytes, block_count, type};
  }
};

/// Writes `value` (a double holding a result) as element `index` of `buffer`, rounded as the
/// runtime rounds (bfloat16/float16 through float).
void store_value(Buffer buffer, std::size_t index, double value) {
  switch (buffer.type) {
    case DataType::float32:
      static_cast<float*>(buffer.data)[index] = static_cast<float>(value);
      break;
    case DataType::float64:
      static_cast<double*>(buffer.data)[index] = value;
      break;
    case DataType::bfloat16:
      static_cast<ddprun::BFloat16*>(buffer.data)[index] = ddprun::to_bfloat16(static_cast<float>(value));
      break;
    case DataType::float16:
      static_cast<ddprun::Float16*>(buffer.data)[index] = ddprun::to_float16(static_cast<float>(value));
      break;
    case DataType::int32:
      static_cast<std::int32_t*>(buffer.data)[index] = static_cast<std::int32_t>(value);
      break;
    case DataType::int64:
      static_cast<std::int64_t*>(buffer.data)[index] = static_cast<std::int64_t>(value);
      break;
  }
}

double load_value(Buffer buffer, std::size_t index) {
  switch (buffer.type) {
    case DataType::float32:
      return static_cast<float*>(buffer.data)[index];
    case DataType::float64:
      return static_cast<double*>(buffer.data)[index];
    case DataType::bfloat16:
      return ddprun::to_float(static_cast<ddprun::BFloat16*>(buffer.data)[index]);
    case DataType::float16:
      return ddprun::to_float(static_cast<ddprun::Float16*>(buffer.data)[index]);
    case DataType::int32:
      return static_cast<std::int32_t*>(buffer.data)[index];
    case DataType::int64:
      return static_cast<double>(static_cast<std::int64_t*>(buffer.data)[index]);
  }
  return 0;
}

bool is_integer(DataType type) { return type == DataType::int32 || type == DataType::int64; }

/// The reduction of every rank's input element, computed exactly, then divided as avg defines it:
/// truncated for integers, in the element's own precision for floating types (float for the 16-bit
/// ones), which is what the runtime does after its exact sum.
double reference(DataType type, ReduceOp op, int world, std::size_t index, int seed) {
  std::int64_t result = input_value(0, index, seed, op);
  for (int rank = 1; rank < world; ++rank) {
    std::int64_t value = input_value(rank, index, seed, op);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        result += value;
        break;
      case ReduceOp::min:
        result = std::min(result, value);
        break;
      case ReduceOp::max:
        result = std::max(result, value);
        break;
      case ReduceOp::product:
        result *= value;
        break;
    }
  }
  if (op != ReduceOp::avg) return static_cast<double>(result);
  if (is_integer(type)) return static_cast<double>(result / world);
  if (type == DataType::float64) return static_cast<double>(result) / world;
  return static_cast<double>(static_cast<float>(result) / static_cast<float>(world));
}

/// Compares after rounding the expected value into the element type, as the runtime stores it.
int expect_equal(Buffer actual, std::size_t index, double expected, const std::string& what) {
  std::uint64_t scratch = 0;
  Buffer rounded{&scratch, 1, actual.type};
  store_value(rounded, 0, expected);
  double want = load_value(rounded, 0);
  double got = load_value(actual, index);
  if (got == want) return 0;
  std::fprintf(stderr, "%s: element %zu is %.17g, expected %.17g\n", what.c_str(), index, got, want);
  return 1;
}

std::string label(ProcessGroup& group, const char* operation, DataType type, std::size_t count,
                  const std::string& extra = "") {
  return "rank " + std::to_string(group.rank()) + "/" + std::to_string(group.size()) + " " + operation + " " +
         std::string(ddprun::name_of(type)) + " x " + std::to_string(count) + (extra.empty() ? "" : " " + extra);
}

// ---- the collectives ------------------------------------------------------------------------

int check_all_reduce(ProcessGroup& group, DataType type, ReduceOp op, std::size_t count, int seed) {
  Values values(type, count);
  Buffer buffer = values.buffer();
  for (std::size_t i = 0; i < count; ++i)
    store_value(buffer, i, static_cast<double>(input_value(group.rank(), i, seed, op)));
  group.all_reduce(buffer, op);
  const auto what = label(group, "all_reduce", type, count, std::string(ddprun::name_of(op)));
  for (std::size_t i = 0; i < count; ++i) {
    if (expect_equal(buffer, i, reference(type, op, group.size(), i, seed), what) != 0) return 1;
  }
  return 0;
}

int check_broadcast(ProcessGroup& group, DataType type, std::size_t count, int root) {
  Values values(type, count);
  Buffer buffer = values.buffer();
  for (std::size_t i = 0; i < count; ++i)
    store_value(buffer, i, static_cast<double>(input_value(group.rank(), i, 1, ReduceOp::sum)));
  group.broadcast(buffer, root);
  const auto what = label(group, "broadcast", type, count, "root " + std::to_string(root));
  for (std::size_t i = 0; i < count; ++i) {
    if (expect_equal(buffer, i, static_cast<double>(input_value(root, i, 1, ReduceOp::sum)), what) != 0) return 1;
  }
  return 0;
}

int check_all_gather(ProcessGroup& group, DataType type, std::size_t count, bool in_place) {
  const auto world = static_cast<std::size_t>(group.size());
  Values output(type, count * world);
  Values separate(type, count);
  Buffer input = in_place ? output.block(static_cast<std::size_t>(group.rank()), count) : separate.buffer();
  for (std::size_t i = 0; i < count; ++i)
    store_value(input, i, static_cast<double>(input_value(group.rank(), i, 2, ReduceOp::sum)));
  group.all_gather(input, output.buffer());
  const auto what = label(group, "all_gather", type, count, in_place ? "in place" : "");
  for (std::size_t rank = 0; rank < world; ++rank) {
    for (std::size_t i = 0; i < count; ++i) {
      double expected = static_cast<double>(input_value(static_cast<int>(rank), i, 2, ReduceOp::sum));
      if (expect_equal(output.buffer(), rank * count + i, expected, what) != 0) return 1;
    }
  }
  return 0;
}

int check_reduce_scatter(ProcessGroup& group, DataType type, ReduceOp op, std::size_t count, bool in_place) {
  const auto world = static_cast<std::size_t>(group.size());
  const auto rank = static_cast<std::size_t>(group.rank());
  Values input(type, count * world);
  Values separate(type, count);
  // Element j of the whole input is element j of an all_reduce: rank r's block is elements r*count...
  for (std::size_t i = 0; i < count * world; ++i) {
    store_value(input.buffer(), i, static_cast<double>(input_value(group.rank(), i, 3, op)));
  }
  Buffer output = in_place ? input.block(rank, count) : separate.buffer();
  group.reduce_scatter(input.buffer(), output, op);
  const auto what =
      label(group, "reduce_scatter", type, count, std::string(ddprun::name_of(op)) + (in_place ? " in place" : ""));
  for (std::size_t i = 0; i < count; ++i) {
    if (expect_equal(output, i, reference(type, op, group.size(), rank * count + i, 3), what) != 0) return 1;
  }
  return 0;
}

/// Several operations in flight at once: they run in submission order and each gets its own result.
int check_async(ProcessGroup& group) {
  constexpr int kInFlight = 8;
  constexpr std::size_t kCount = 1000;
  std::vector<Values> values;
  for (int k = 0; k < kInFlight; ++k) values.emplace_back(DataType::float32, kCount);
  std::vector<std::shared_ptr<ddprun::Work>> works;
  for (int k = 0; k < kInFlight; ++k) {
    for (std::size_t i = 0; i < kCount; ++i) {
      store_value(values[k].buffer(), i, static_cast<double>(input_value(group.rank(), i, 10 + k, ReduceOp::sum)));
    }
    works.push_back(group.all_reduce_async(values[k].buffer(), ReduceOp::sum));
  }
  works.push_back(group.barrier_async());
  int failures = 0;
  for (auto& work : works) work->wait(60s);
  for (auto& work : works) failures += work->completed() ? 0 : 1;
  for (int k = 0; k < kInFlight && failures == 0; ++k) {
    const auto what = label(group, "all_reduce_async", DataType::float32, kCount, "#" + std::to_string(k));
    for (std::size_t i = 0; i < kCount; ++i) {
      if (expect_equal(values[k].buffer(), i, reference(DataType::float32, ReduceOp::sum, group.size(), i, 10 + k),
                       what)) {
        ++failures;
        break;
      }
    }
  }
  return failures;
}

/// Everything, in the same order on every rank.
int run_everything(ProcessGroup& group, const ddprun::Identity&) {
  int failures = 0;
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      // Small buffers take the direct exchange, 300001 elements (over 256 KiB) gloo's ring.
      for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{300'001}}) {
        failures += check_all_reduce(group, type, op, count, static_cast<int>(count % 1000));
      }
      for (std::size_t count : {std::size_t{1}, std::size_t{333}}) {
        failures += check_reduce_scatter(group, type, op, count, false);
        failures += check_reduce_scatter(group, type, op, count, true);
      }
    }
    for (int root = 0; root < group.size(); ++root) {
      failures += check_broadcast(group, type, 1, root);
      failures += check_broadcast(group, type, 1000, root);
    }
    for (std::size_t count : {std::size_t{1}, std::size_t{1000}}) {
      failures += check_all_gather(group, type, count, false);
      failures += check_all_gather(group, type, count, true);
    }
    group.barrier();
  }
  // Larger than 2 x size segments of the ring's largest message (4 MiB) at every world size here.
  failures += check_all_reduce(group, DataType::float32, ReduceOp::sum, 9'000'001, 5);
  failures += check_reduce_scatter(group, DataType::float32, ReduceOp::sum, 700'001, false);
  failures += check_all_gather(group, DataType::float64, 300'001, false);
  failures += check_broadcast(group, DataType::int64, 300'001, group.size() - 1);
  // Nothing to do is fine too.
  failures += check_all_reduce(group, DataType::float32, ReduceOp::sum, 0, 0);
  failures += check_async(group);
  return failures;
}

class Collectives : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(Collectives, EveryOperationTypeAndReductionMatchesTheReference) {
  const auto [world, agent_store] = GetParam();
  EXPECT_EQ(run_world(world, agent_store, run_everything), 0) << "ranks failed; their messages are above";
}

INSTANTIATE_TEST_SUITE_P(Worlds, Collectives, ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Bool()),
                         [](const auto& test) {
                           return "world" + std::to_string(std::get<0>(test.param)) +
                                  (std::get<1>(test.param) ? "_agent_store" : "_rank0_store");
                         });

TEST(Collectives, TwoGroupsInOneProcessKeepTheirKeysApart) {
  for (bool agent_store : {false, true}) {
    EXPECT_EQ(run_world(3, agent_store,
                        [](ProcessGroup& first, const ddprun::Identity& identity) {
                          ddprun::ProcessGroupOptions options;
                          options.backend = ddprun::Backend::gloo;
                          options.timeout = 60s;
                          auto second = ProcessGroup::create(identity, options);
                          int failures = check_all_reduce(*second, DataType::int64, ReduceOp::sum, 10, 1);
                          failures += check_all_reduce(first, DataType::int64, ReduceOp::max, 10, 2);
                          failures += check_all_gather(*second, DataType::int32, 5, false);
                          return failures;
                        }),
              0)
        << (agent_store ? "agent store" : "rank 0's store");
  }
}

TEST(Collectives, ArgumentsThatDoNotFitAreRejectedBeforeAnythingRuns) {
  EXPECT_EQ(
      run_world(
          2, false,
          [](ProcessGroup& group, const ddprun::Identity&) {
            std::vector<float> small(3), large(5);
            std::vector<double> other(6);
            int failures = 0;
            auto expect_error = [&](const std::function<void()>& call, const char* what) {
              try {
                call();
                std::fprintf(stderr, "%s: no error\n", what);
                ++failures;
              } catch (const ddprun::Error&) {
              }
            };
            expect_error(
                [&] { group.all_gather(ddprun::buffer_of(small.data(), 3), ddprun::buffer_of(large.data(), 5)); },
                "all_gather with a short output");
            expect_error(
                [&] { group.all_gather(ddprun::buffer_of(small.data(), 3), ddprun::buffer_of(other.data(), 6)); },
                "all_gather with mixed types");
            expect_error(
                [&] { group.reduce_scatter(ddprun::buffer_of(large.data(), 5), ddprun::buffer_of(small.data(), 3)); },
                "reduce_scatter with a wrong input");
            expect_error([&] { group.broadcast(ddprun::buffer_of(small.data(), 3), 2); }, "broadcast from rank 2 of 2");
            expect_error([&] { group.all_reduce(Buffer{nullptr, 4, DataType::float32}); }, "all_reduce of null");
            // The group still works: nothing was queued.
            return failures + check_all_reduce(group, DataType::float32, ReduceOp::max, 5, 0);
          }),
      0);
}

}  // namespace

/// rendezvous_sim: one dynamic (c10d) rendezvous round of T simulated agents in one process, used
/// by bench/rendezvous_bench.py (rdzv_sim_1024).
///
/// Starts a StoreServer on 127.0.0.1 in this process (or uses the store at --host/--port), then T
/// agents (--threads, default 1024), each with its own connection (AsyncStoreClient) and
/// RoundProtocol, as T agents would have. The agents are coroutines on L event loops (--loops), each
/// loop a thread of its own; agent i runs on loop i mod L. The default, one loop per agent, is a
/// thread per agent as before the round protocol became coroutines, so that results compare with
/// earlier runs; --loops 1 is the agent's own model (everything on one event loop).
/// Setup (not timed): every agent connects and runs check_job(). Then all agents are released at
/// once, by one write to an eventfd that every loop waits on (one system call wakes every loop, as
/// one notify_all woke every thread before), and each joins the round with min = max = T. Timed:
/// from the release (just before the write) until the last agent has its decision. As each thread
/// of the thread-per-agent simulation did, an agent closes its connection as soon as it has its
/// decision, and a loop's thread ends with its last agent. Checks: every agent got the same
/// decision, with no error, world size T, and group ranks 0..T-1 each exactly once.
///
/// Result: one JSON line on stdout; exit 0 when the round formed and the checks passed, 1 when not
/// (the JSON says why), 2 on a usage error.
#include <fcntl.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/async_store_client.hpp"
#include "rendezvous/open_file_limit.hpp"
#include "rendezvous/rendezvous_settings.hpp"
#include "rendezvous/round_protocol.hpp"
#include "rendezvous/round_record.hpp"
#include "rendezvous/store_server.hpp"

namespace rdzv = ddprun::rendezvous;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int threads = 1024;  ///< agents
  int loops = 0;       ///< event loops (threads) the agents share; 0 = one per agent
  std::string host;  ///< empty: an in-process StoreServer on 127.0.0.1
  int port = 0;
  std::string run_id = "sim";
  double join_timeout_s = 120;
  std::size_t stack_kib = 256;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "rendezvous_sim: %s\n"
               "usage: rendezvous_sim [--threads T] [--loops L] [--host H --port P] [--run-id ID]\n"
               "                      [--join-timeout SECONDS] [--stack-kib KIB]\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(std::string(arg) + " needs a value");
      return argv[++i];
    };
    try {
      if (arg == "--threads") o.threads = std::stoi(value());
      else if (arg == "--loops") o.loops = std::stoi(value());
      else if (arg == "--host") o.host = value();
      else if (arg == "--port") o.port = std::stoi(value());
      else if (arg == "--run-id") o.run_id = value();
      else if (arg == "--join-timeout") o.join_timeout_s = std::stod(value());
      else if (arg == "--stack-kib") o.stack_kib = std::stoul(value());
      else if (arg == "--help" || arg == "-h") usage("one dynamic round of T simulated agents");
      else usage("unknown argument " + std::string(arg));
    } catch (const std::logic_error&) {  // stoi/stod: not a number
      usage("bad value for " + std::string(arg));
    }
  }
  if (o.threads < 1) usage("--threads must be >= 1");
  if (o.loops < 0) usage("--loops must be >= 0");
  if (o.loops == 0 || o.loops > o.threads) o.loops = o.threads;
  if (!o.host.empty() && o.port <= 0) usage("--host needs --port");
  return o;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// What one simulated agent did.
struct Agent {
  rdzv::NodeInfo self;
  std::optional<rdzv::RoundDecision> decision;
  std::string error;  ///< "<phase>: <what()>" when it failed
  Clock::time_point connected{};
  Clock::time_point decided{};
  std::unique_ptr<rdzv::AsyncStoreClient> client;
  std::optional<rdzv::RoundProtocol> protocol;
};

/// One event loop and the thread that runs it until told to stop.
struct Loop {
  boost::asio::io_context io{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  boost::asio::posix::stream_descriptor gate{io};  ///< a copy of the release eventfd
  std::vector<Agent*> agents;                      ///< the agents this loop runs
  std::size_t joining = 0;                         ///< of them, those still joining
  pthread_t thread{};
};

void* loop_main(void* p) {
  static_cast<Loop*>(p)->io.run();
  return nullptr;
}

/// Setup of one agent: connect, check the job. Counts `ready` down whatever the outcome.
rdzv::Task<void> set_up(Agent& agent, std::latch& ready) {
  const char* phase = "connect";
  try {
    co_await agent.client->connect();
    phase = "check_job";
    co_await agent.protocol->check_job(agent.self);
    agent.connected = Clock::now();
  } catch (const std::exception& e) {
    agent.error = std::string(phase) + ": " + e.what();
  }
  ready.count_down();
}

/// The timed part of one agent: its join. Counts `done` down whatever the outcome.
rdzv::Task<void> join(Agent& agent, std::latch& done) {
  try {
    agent.decision = co_await agent.protocol->join(agent.self);
    agent.decided = Clock::now();
  } catch (const std::exception& e) {
    agent.decided = Clock::now();
    agent.error = std::string("join: ") + e.what();
  }
  // The agent is done with its connection: let it go now, on its loop, as each thread of the
  // thread-per-agent simulation before the coroutines did when its join returned. Kept to the end,
  // 1024 clients each hold the ~150 KB read buffer the decision grew (150 MiB), so the agents that
  // decode later cannot reuse freed memory and fault in fresh pages instead (108k page faults
  // against 76k, and 1.4x the peak RSS): a cost of this simulation, not of an agent, which is a
  // process of its own with one such buffer.
  agent.protocol.reset();
  agent.client.reset();
  done.count_down();
}

void rethrow(std::exception_ptr error) {
  if (error) std::rethrow_exception(error);
}

/// Waits on the loop for the release (the gate eventfd readable), then starts the join of each of
/// the loop's agents whose setup succeeded; the others count `done` down at once.
rdzv::Task<void> join_when_released(Loop& loop, std::latch& done) {
  co_await loop.gate.async_wait(boost::asio::posix::descriptor_base::wait_read, boost::asio::use_awaitable);
  for (Agent* agent : loop.agents) {
    if (agent->error.empty()) {
      ++loop.joining;
      boost::asio::co_spawn(loop.io, join(*agent, done), [&loop](std::exception_ptr error) {
        if (--loop.joining == 0) loop.work.reset();  // the loop's thread ends with its last agent
        rethrow(error);
      });
    } else {
      done.count_down();
    }
  }
  if (loop.joining == 0) loop.work.reset();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const long fd_limit = rdzv::raise_open_file_limit();
  // In process: each agent's client socket and the server's end of it; each loop's epoll, eventfd,
  // timerfd and copy of the gate; plus slack.
  const long fds_needed = (o.host.empty() ? 2L : 1L) * o.threads + 4L * o.loops + 64;
  if (fd_limit >= 0 && fd_limit < fds_needed) {
    std::printf("{\"status\":\"error\",\"error\":%s}\n",
                json_string("open-file limit " + std::to_string(fd_limit) + " < " +
                            std::to_string(fds_needed) + " needed; raise `ulimit -Hn`")
                    .c_str());
    return 1;
  }

  std::unique_ptr<rdzv::StoreServer> server;
  rdzv::StoreClientOptions store;
  if (o.host.empty()) {
    rdzv::StoreServerOptions server_options;
    server_options.host = "127.0.0.1";
    server_options.port = 0;
    server = std::make_unique<rdzv::StoreServer>(server_options);
    server->start();
    store.host = "127.0.0.1";
    store.port = server->port();
  } else {
    store.host = o.host;
    store.port = o.port;
  }
  const auto join_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.join_timeout_s * 1000));
  store.connect_timeout = std::chrono::seconds(60);
  store.timeout = join_timeout;
  rdzv::RendezvousSettings settings;
  settings.run_id = o.run_id;
  settings.is_static = false;
  settings.min_nodes = o.threads;
  settings.max_nodes = o.threads;
  settings.join_timeout = join_timeout;
  settings.read_timeout = join_timeout;

  // pthreads rather than std::thread: 1024 threads at the default 8 MiB stack reserve 8 GiB.
  std::vector<std::unique_ptr<Loop>> loops;
  for (int i = 0; i < o.loops; ++i) loops.push_back(std::make_unique<Loop>());

  std::vector<Agent> agents(o.threads);
  const std::string id_prefix = "sim-" + std::to_string(::getpid()) + "-";
  for (int i = 0; i < o.threads; ++i) {
    Agent& a = agents[i];
    a.self.id = id_prefix + std::to_string(i);
    a.self.host_name = "sim" + std::to_string(i);
    a.self.addr = "127.0.0.1";
    a.self.nproc = 1;
    a.self.store_port = 0;
    a.client = std::make_unique<rdzv::AsyncStoreClient>(loops[i % o.loops]->io.get_executor(), store);
    a.protocol.emplace(*a.client, settings);
  }

  std::latch ready(o.threads);
  std::latch done(o.threads);
  for (int i = 0; i < o.threads; ++i) {
    loops[i % o.loops]->agents.push_back(&agents[i]);
    boost::asio::co_spawn(loops[i % o.loops]->io, set_up(agents[i], ready), rethrow);
  }
  const int gate = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  for (auto& loop : loops) {
    loop->gate.assign(::fcntl(gate, F_DUPFD_CLOEXEC, 0));  // one epoll registration per loop
    boost::asio::co_spawn(loop->io, join_when_released(*loop, done), rethrow);
  }

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, std::max<std::size_t>(o.stack_kib * 1024, PTHREAD_STACK_MIN));
  const auto t_setup = Clock::now();
  for (int i = 0; i < o.loops; ++i) {
    if (int rc = pthread_create(&loops[i]->thread, &attr, loop_main, loops[i].get()); rc != 0) {
      std::printf("{\"status\":\"error\",\"error\":%s}\n",
                  json_string("pthread_create of loop " + std::to_string(i) + ": " + std::strerror(rc)).c_str());
      std::fflush(stdout);
      std::_Exit(1);  // the loops already started run forever
    }
  }
  pthread_attr_destroy(&attr);

  ready.wait();
  const auto t_ready = Clock::now();  // t0, just before the release
  const std::uint64_t one = 1;
  if (::write(gate, &one, sizeof one) != static_cast<ssize_t>(sizeof one)) {
    std::printf("{\"status\":\"error\",\"error\":%s}\n",
                json_string(std::string("write to the release eventfd: ") + std::strerror(errno)).c_str());
    std::fflush(stdout);
    std::_Exit(1);
  }
  done.wait();
  const auto t_all = Clock::now();
  for (auto& loop : loops) {
    loop->work.reset();
    loop->io.stop();
  }
  for (auto& loop : loops) pthread_join(loop->thread, nullptr);
  ::close(gate);

  // --------------------------------------------------------------------------- checks
  int failed = 0;
  std::string first_error;
  std::optional<Clock::time_point> first_decided, last_decided;
  std::vector<double> decided_ms;
  for (const auto& a : agents) {
    if (!a.error.empty()) {
      if (failed++ == 0) first_error = a.self.id + ": " + a.error;
      continue;
    }
    if (!first_decided || a.decided < *first_decided) first_decided = a.decided;
    if (!last_decided || a.decided > *last_decided) last_decided = a.decided;
    decided_ms.push_back(ms_between(t_ready, a.decided));
  }

  std::string mismatch;
  const rdzv::RoundDecision* reference = nullptr;
  const Agent* reference_agent = nullptr;
  for (const auto& a : agents) {
    if (!a.decision) continue;
    if (!reference) {
      reference = &*a.decision;
      reference_agent = &a;
      continue;
    }
    const auto& d = *a.decision;
    if (d.round != reference->round || d.restart_count != reference->restart_count ||
        d.nodes != reference->nodes || d.error != reference->error) {
      mismatch = a.self.id + " got a decision that differs from " + reference_agent->self.id + "'s";
      break;
    }
  }
  if (reference && mismatch.empty()) {
    if (!reference->error.empty()) {
      mismatch = "the decision carries an error: " + reference->error;
    } else if (reference->world_size() != o.threads ||
               static_cast<int>(reference->nodes.size()) != o.threads) {
      mismatch = "world size " + std::to_string(reference->world_size()) + " with " +
                 std::to_string(reference->nodes.size()) + " nodes, expected " + std::to_string(o.threads);
    } else {
      std::vector<int> seen(o.threads, 0);
      for (const auto& a : agents) {
        const int rank = reference->group_rank_of(a.self.id);
        if (rank < 0 || rank >= o.threads) {
          mismatch = a.self.id + " has group rank " + std::to_string(rank);
          break;
        }
        if (seen[rank]++) {
          mismatch = "group rank " + std::to_string(rank) + " given twice";
          break;
        }
      }
    }
  }

  std::sort(decided_ms.begin(), decided_ms.end());
  const bool ok = failed == 0 && mismatch.empty() && reference != nullptr;
  std::string out = "{";
  out += "\"status\":" + json_string(ok ? "ok" : "error");
  out += ",\"threads\":" + std::to_string(o.threads);
  out += ",\"loops\":" + std::to_string(o.loops);
  out += ",\"store\":" + json_string(o.host.empty() ? "in-process 127.0.0.1:" + std::to_string(store.port)
                                                    : o.host + ":" + std::to_string(o.port));
  char buf[256];
  std::snprintf(buf, sizeof buf, ",\"setup_ms\":%.3f,\"join_ms\":%.3f", ms_between(t_setup, t_ready),
                last_decided ? ms_between(t_ready, *last_decided) : -1.0);
  out += buf;
  if (!decided_ms.empty()) {
    std::snprintf(buf, sizeof buf, ",\"first_decision_ms\":%.3f,\"median_decision_ms\":%.3f",
                  decided_ms.front(), decided_ms[decided_ms.size() / 2]);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, ",\"total_ms\":%.3f", ms_between(t_setup, t_all));
  out += buf;
  if (reference) {
    out += ",\"round\":" + std::to_string(reference->round);
    out += ",\"world_size\":" + std::to_string(reference->world_size());
  }
  out += ",\"failed_agents\":" + std::to_string(failed);
  if (!first_error.empty()) out += ",\"error\":" + json_string(first_error);
  else if (!mismatch.empty()) out += ",\"error\":" + json_string(mismatch);
  out += ",\"open_file_limit\":" + std::to_string(fd_limit);
  out += "}";
  std::printf("%s\n", out.c_str());
  std::fflush(stdout);
  if (server) server->stop();
  return ok ? 0 : 1;
}

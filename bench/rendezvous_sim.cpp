/// rendezvous_sim: one dynamic (c10d) rendezvous round of T simulated agents in one process, used
/// by bench/rendezvous_bench.py (rdzv_sim_1024).
///
/// Starts a StoreServer on 127.0.0.1 in this process (or uses the store at --host/--port), then T
/// threads (default 1024), each with its own StoreClient and RoundProtocol, as T agents would have.
/// Setup (not timed): every thread connects and runs check_job(). Then all threads are released at
/// once and each joins the round with min = max = T. Timed: from the release (just before the first
/// join call) until the last thread has its decision. Checks: every thread got the same decision,
/// with no error, world size T, and group ranks 0..T-1 each exactly once.
///
/// Result: one JSON line on stdout; exit 0 when the round formed and the checks passed, 1 when not
/// (the JSON says why), 2 on a usage error.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/open_file_limit.hpp"
#include "rendezvous/rendezvous_settings.hpp"
#include "rendezvous/round_protocol.hpp"
#include "rendezvous/round_record.hpp"
#include "rendezvous/store_client.hpp"
#include "rendezvous/store_server.hpp"

namespace rdzv = ddprun::rendezvous;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int threads = 1024;
  std::string host;  ///< empty: an in-process StoreServer on 127.0.0.1
  int port = 0;
  std::string run_id = "sim";
  double join_timeout_s = 120;
  std::size_t stack_kib = 256;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "rendezvous_sim: %s\n"
               "usage: rendezvous_sim [--threads T] [--host H --port P] [--run-id ID]\n"
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
};

/// A gate the main thread opens once, releasing every waiting thread together.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

struct Shared {
  const Options* options = nullptr;
  rdzv::StoreClientOptions store;
  rdzv::RendezvousSettings settings;
  std::latch* ready = nullptr;  ///< counted down once per thread, after setup (success or not)
  Gate* start = nullptr;
};

void run_agent(const Shared& shared, Agent& agent) {
  std::unique_ptr<rdzv::StoreClient> client;
  std::optional<rdzv::RoundProtocol> protocol;
  const char* phase = "connect";
  try {
    client = std::make_unique<rdzv::StoreClient>(shared.store);
    phase = "check_job";
    protocol.emplace(*client, shared.settings);
    protocol->check_job(agent.self);
    agent.connected = Clock::now();
  } catch (const std::exception& e) {
    agent.error = std::string(phase) + ": " + e.what();
  }
  shared.ready->count_down();
  shared.start->wait();
  if (!agent.error.empty()) return;
  try {
    agent.decision = protocol->join(agent.self);
    agent.decided = Clock::now();
  } catch (const std::exception& e) {
    agent.decided = Clock::now();
    agent.error = std::string("join: ") + e.what();
  }
}

struct ThreadArgs {
  const Shared* shared;
  Agent* agent;
};

void* thread_main(void* p) {
  auto* args = static_cast<ThreadArgs*>(p);
  run_agent(*args->shared, *args->agent);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const long fd_limit = rdzv::raise_open_file_limit();
  // In process: each agent's client socket and the server's end of it, plus slack.
  const long fds_needed = (o.host.empty() ? 2L : 1L) * o.threads + 64;
  if (fd_limit >= 0 && fd_limit < fds_needed) {
    std::printf("{\"status\":\"error\",\"error\":%s}\n",
                json_string("open-file limit " + std::to_string(fd_limit) + " < " +
                            std::to_string(fds_needed) + " needed; raise `ulimit -Hn`")
                    .c_str());
    return 1;
  }

  std::unique_ptr<rdzv::StoreServer> server;
  Shared shared;
  shared.options = &o;
  if (o.host.empty()) {
    rdzv::StoreServerOptions server_options;
    server_options.host = "127.0.0.1";
    server_options.port = 0;
    server = std::make_unique<rdzv::StoreServer>(server_options);
    server->start();
    shared.store.host = "127.0.0.1";
    shared.store.port = server->port();
  } else {
    shared.store.host = o.host;
    shared.store.port = o.port;
  }
  const auto join_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.join_timeout_s * 1000));
  shared.store.connect_timeout = std::chrono::seconds(60);
  shared.store.timeout = join_timeout;
  shared.settings.run_id = o.run_id;
  shared.settings.is_static = false;
  shared.settings.min_nodes = o.threads;
  shared.settings.max_nodes = o.threads;
  shared.settings.join_timeout = join_timeout;
  shared.settings.read_timeout = join_timeout;

  std::vector<Agent> agents(o.threads);
  const std::string id_prefix = "sim-" + std::to_string(::getpid()) + "-";
  for (int i = 0; i < o.threads; ++i) {
    agents[i].self.id = id_prefix + std::to_string(i);
    agents[i].self.host_name = "sim" + std::to_string(i);
    agents[i].self.addr = "127.0.0.1";
    agents[i].self.nproc = 1;
    agents[i].self.store_port = 0;
  }

  std::latch ready(o.threads);
  Gate start;
  shared.ready = &ready;
  shared.start = &start;

  // pthreads rather than std::thread: 1024 threads at the default 8 MiB stack reserve 8 GiB.
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, std::max<std::size_t>(o.stack_kib * 1024, PTHREAD_STACK_MIN));
  std::vector<pthread_t> threads(o.threads);
  std::vector<ThreadArgs> args(o.threads);
  const auto t_setup = Clock::now();
  for (int i = 0; i < o.threads; ++i) {
    args[i] = ThreadArgs{&shared, &agents[i]};
    if (int rc = pthread_create(&threads[i], &attr, thread_main, &args[i]); rc != 0) {
      std::printf("{\"status\":\"error\",\"error\":%s}\n",
                  json_string("pthread_create of thread " + std::to_string(i) + ": " + std::strerror(rc)).c_str());
      std::fflush(stdout);
      std::_Exit(1);  // the threads already started wait on the gate forever
    }
  }
  pthread_attr_destroy(&attr);

  ready.wait();
  const auto t_ready = Clock::now();
  start.open();  // t0: just before the first join call
  for (auto& t : threads) pthread_join(t, nullptr);
  const auto t_all = Clock::now();

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
  out += ",\"store\":" + json_string(o.host.empty() ? "in-process 127.0.0.1:" + std::to_string(shared.store.port)
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

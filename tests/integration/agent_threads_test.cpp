// The threads of a multi-node agent: with a job running (two agents on 127.0.0.1, their workers
// started), each agent has its own thread and the store servers' threads, each named, and nothing
// else (issue 12: the rendezvous runs on the agent's event loop, not on threads of its own). The
// architecture page lists the same threads.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "../support/free_port.hpp"
#include "harness.hpp"

using namespace ddprun::testing;
using namespace std::chrono_literals;

namespace {

/// The agent's own thread: the process's first, named after the binary.
const char* const kAgentThread = "ddprun";
/// A store server's thread (rendezvous/store_server.cpp), one per server.
const char* const kStoreThread = "ddprun-store";

/// The names (comm) of `pid`'s threads, sorted.
std::vector<std::string> thread_names(pid_t pid) {
  std::vector<std::string> names;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string listed(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return "[" + text + "]";
}

/// A worker that says it started (DIR/started_<RANK>) and waits, at most 2 minutes, for DIR/go.
std::string waiting_worker(const TempDir& dir) {
  const auto path = dir.path() / "worker";
  const std::string d = "\"" + dir.str() + "\"";
  std::ofstream(path) << "#!/bin/sh\n"
                         "touch " + d + "/started_$RANK\n"
                         "i=0; while [ ! -e " + d + "/go ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done\n";
  ::chmod(path.c_str(), 0755);
  return path.string();
}

struct Job {
  std::string what;
  std::vector<std::vector<std::string>> nodes;  ///< each agent's flags, without the program
  /// The threads each agent must have, by name; for c10d, where either agent may be group rank 0,
  /// the store threads of both together.
  std::vector<std::vector<std::string>> expected;
  int store_threads_in_all = 0;
};

void check_threads_while_running(const Job& job) {
  SCOPED_TRACE(job.what);
  TempDir dir;
  const std::string worker = waiting_worker(dir);
  std::vector<std::unique_ptr<Launch>> agents;
  for (auto args : job.nodes) {
    args.push_back("--no_python");
    args.push_back(worker);
    agents.push_back(std::make_unique<Launch>(args));
  }
  const bool running = eventually(
      [&] {
        return std::filesystem::exists(dir.path() / "started_0") && std::filesystem::exists(dir.path() / "started_1");
      },
      60s);
  // One heartbeat interval at least (keep_alive_interval=1 below), so that every part of the
  // membership has run: the round formed, the watcher waits, the keep-alive beat.
  std::this_thread::sleep_for(1500ms);
  std::vector<std::vector<std::string>> seen;
  for (const auto& agent : agents) seen.push_back(thread_names(agent->pid()));
  std::ofstream(dir.path() / "go").flush();
  std::vector<Outcome> outcomes;
  for (const auto& agent : agents) outcomes.push_back(agent->wait(60s));
  ASSERT_TRUE(running) << "the workers did not start; agent 0: " << outcomes[0].err << "\nagent 1: " << outcomes[1].err;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_EQ(outcomes[i].exit_status, 0) << "agent " << i << ": " << outcomes[i].err;
  }
  int store_threads = 0;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    SCOPED_TRACE("agent " + std::to_string(i) + ": " + listed(seen[i]));
    if (!job.expected.empty()) {
      EXPECT_EQ(seen[i], job.expected[i]);
    }
    EXPECT_EQ(std::count(seen[i].begin(), seen[i].end(), kAgentThread), 1);
    for (const auto& name : seen[i]) {
      EXPECT_TRUE(name == kAgentThread || name == kStoreThread) << "a thread named " << name;
      if (name == kStoreThread) ++store_threads;
    }
  }
  EXPECT_EQ(store_threads, job.store_threads_in_all);
}

}  // namespace

TEST(AgentThreads, AStaticJobsAgentsHaveTheirOwnThreadAndNode0TheStoresToo) {
  const int port = free_port();
  auto node = [&](int rank) {
    return std::vector<std::string>{"--nnodes=2",
                                    "--node_rank=" + std::to_string(rank),
                                    "--master_addr=127.0.0.1",
                                    "--master_port=" + std::to_string(port),
                                    "--nproc_per_node=1",
                                    "--rdzv_conf=timeout=60,keep_alive_interval=1"};
  };
  // Node 0 hosts the job's store, which its workers use too (--worker-store agent, the default).
  check_threads_while_running(Job{"static", {node(0), node(1)},
                                  {{kAgentThread, kStoreThread}, {kAgentThread}}, 1});
}

TEST(AgentThreads, AC10dJobsAgentsHaveTheirOwnThreadAndTheStoresTheirs) {
  const int port = free_port();
  auto node = [&](bool host) {
    return std::vector<std::string>{"--nnodes=2",
                                    "--rdzv_backend=c10d",
                                    "--rdzv_endpoint=127.0.0.1:" + std::to_string(port),
                                    "--rdzv_id=threads",
                                    "--nproc_per_node=1",
                                    std::string("--rdzv_conf=keep_alive_interval=1,is_host=") + (host ? "1" : "0")};
  };
  // The host serves the rendezvous store; group rank 0 (either agent) the round's worker store.
  check_threads_while_running(Job{"c10d", {node(true), node(false)}, {}, 2});
}

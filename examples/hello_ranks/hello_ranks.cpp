/// hello_ranks: a worker that proves what ddprun (or torchrun) told it. Every worker checks its
/// torchrun environment for consistency, then all ranks meet through the store at
/// MASTER_ADDR:MASTER_PORT: each writes a report, rank 0 checks that exactly ranks
/// 0..WORLD_SIZE-1 of the same job and attempt reported, and releases the others. Exits non-zero
/// on any inconsistency, so a wrong environment cannot pass.
///
/// The store is the agent's (ddprun, TORCHELASTIC_USE_AGENT_STORE=True), or else rank 0 hosts one,
/// as PyTorch's rank 0 does under a launcher without an agent store.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "rendezvous/store_client.hpp"
#include "rendezvous/store_server.hpp"

using namespace ddprun::rendezvous;

namespace {

std::string required(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) throw std::runtime_error(std::string("environment variable ") + name + " is not set");
  return value;
}

int required_int(const char* name) {
  std::string text = required(name);
  std::size_t used = 0;
  int value = std::stoi(text, &used);
  if (used != text.size()) throw std::runtime_error(std::string(name) + "=" + text + " is not an integer");
  return value;
}

struct Identity {
  int rank, local_rank, world_size, local_world_size, group_rank, restart_count;
  std::string run_id, master_addr;
  int master_port;
  bool agent_store;
};

Identity read_identity() {
  Identity id{required_int("RANK"),
              required_int("LOCAL_RANK"),
              required_int("WORLD_SIZE"),
              required_int("LOCAL_WORLD_SIZE"),
              required_int("GROUP_RANK"),
              required_int("TORCHELASTIC_RESTART_COUNT"),
              required("TORCHELASTIC_RUN_ID"),
              required("MASTER_ADDR"),
              required_int("MASTER_PORT"),
              required("TORCHELASTIC_USE_AGENT_STORE") == "True"};
  auto check = [](bool ok, const std::string& what) {
    if (!ok) throw std::runtime_error("inconsistent environment: " + what);
  };
  check(0 <= id.rank && id.rank < id.world_size, "RANK outside [0, WORLD_SIZE)");
  check(0 <= id.local_rank && id.local_rank < id.local_world_size, "LOCAL_RANK outside [0, LOCAL_WORLD_SIZE)");
  check(id.local_world_size <= id.world_size, "LOCAL_WORLD_SIZE > WORLD_SIZE");
  check(id.rank == id.group_rank * id.local_world_size + id.local_rank,
        "RANK != GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK");
  check(required("ROLE_RANK") == std::to_string(id.rank), "ROLE_RANK != RANK");
  check(id.master_port > 0 && id.master_port < 65536, "MASTER_PORT out of range");
  return id;
}

std::string report_of(const Identity& id) {
  std::ostringstream text;
  text << id.rank << ' ' << id.world_size << ' ' << id.run_id << ' ' << id.restart_count << ' ' << ::getpid();
  return text.str();
}

/// Rank 0: every rank's report must name its own rank, this world size, job and attempt.
void check_reports(StoreClient& store, const Identity& id) {
  for (int rank = 0; rank < id.world_size; ++rank) {
    std::istringstream report(store.get("hello/report/" + std::to_string(rank)));
    int reported_rank = -1, world_size = -1, attempt = -1;
    std::string run_id;
    report >> reported_rank >> world_size >> run_id >> attempt;
    if (reported_rank != rank || world_size != id.world_size || run_id != id.run_id || attempt != id.restart_count) {
      throw std::runtime_error("rank " + std::to_string(rank) + " reported \"" + report.str() + "\"");
    }
  }
  if (store.check({"hello/report/" + std::to_string(id.world_size)})) {
    throw std::runtime_error("a rank beyond WORLD_SIZE reported");
  }
}

}  // namespace

int main() {
  try {
    Identity id = read_identity();
    std::unique_ptr<StoreServer> own_store;
    if (!id.agent_store && id.rank == 0) {
      own_store = std::make_unique<StoreServer>(StoreServerOptions{.host = "0.0.0.0", .port = id.master_port});
      own_store->start();
    }
    StoreClient store(StoreClientOptions{.host = id.master_addr, .port = id.master_port,
                                         .timeout = std::chrono::seconds(60)});
    store.set("hello/report/" + std::to_string(id.rank), report_of(id));
    if (id.rank == 0) {
      check_reports(store, id);
      store.set("hello/released", "ok");
      std::cout << "rank 0: all " << id.world_size << " ranks of job " << id.run_id << " reported (attempt "
                << id.restart_count << ")" << std::endl;
    } else {
      store.get("hello/released");
      std::cout << "rank " << id.rank << " (local " << id.local_rank << ") of " << id.world_size
                << ": confirmed by rank 0" << std::endl;
    }
    // Rank 0's own store must outlive the others' last request.
    if (store.add("hello/done", 1) == id.world_size) store.set("hello/done_all", "1");
    if (own_store) store.wait({"hello/done_all"}, std::chrono::seconds(60));
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "hello_ranks: " << error.what() << std::endl;
    return 1;
  }
}

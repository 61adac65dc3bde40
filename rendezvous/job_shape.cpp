#include "rendezvous/job_shape.hpp"

#include <nlohmann/json.hpp>
#include <vector>

#include "common/bounded_json.hpp"
#include "rendezvous/rendezvous_error.hpp"

using nlohmann::json;

namespace ddprun::rendezvous {
namespace {

/// "node rank 1 on b (10.0.0.2)" (static) or "node b (10.0.0.2)" (c10d).
std::string who(const JobShape& shape) {
  std::string text = "node ";
  if (shape.static_rank >= 0) text += "rank " + std::to_string(shape.static_rank) + " on ";
  return text + shape.host_name + " (" + shape.addr + ")";
}

std::string nnodes_flag(const JobShape& shape) {
  std::string flag = "--nnodes=" + std::to_string(shape.min_nodes);
  if (shape.min_nodes != shape.max_nodes) {
    flag += ':';  // not ":" + to_string(): g++ 12 warns falsely (-Wrestrict) on that
    flag += std::to_string(shape.max_nodes);
  }
  return flag;
}

/// One flag in which two shapes may differ: its name and how a shape spells it.
struct Flag {
  const char* name;
  std::string (*spelled)(const JobShape&);
};

const Flag kFlags[] = {
    {"--rdzv-backend", [](const JobShape& s) { return "--rdzv-backend=" + std::string(backend_name(s.backend)); }},
    {"--nnodes", nnodes_flag},
    {"--max-restarts", [](const JobShape& s) { return "--max-restarts=" + std::to_string(s.max_restarts); }},
    {"--worker-store", [](const JobShape& s) { return std::string("--worker-store=") + (s.agent_worker_store ? "agent" : "fresh"); }},
};

/// "a", "a and b", "a, b and c".
std::string listed(const std::vector<std::string>& items) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += i + 1 == items.size() ? " and " : ", ";
    text += items[i];
  }
  return text;
}

}  // namespace

JobShape job_shape_of(const RendezvousSettings& settings, const NodeInfo& by) {
  JobShape shape;
  shape.backend = settings.is_static ? RdzvBackend::static_ : RdzvBackend::c10d;
  shape.min_nodes = settings.min_nodes;
  shape.max_nodes = settings.max_nodes;
  shape.max_restarts = settings.max_restarts;
  shape.agent_worker_store = settings.agent_worker_store;
  shape.host_name = by.host_name;
  shape.addr = by.addr;
  shape.static_rank = settings.is_static ? by.static_rank : -1;
  return shape;
}

std::string encode_job_shape(const JobShape& shape) {
  return json{{"backend", std::string(backend_name(shape.backend))},
              {"min_nodes", shape.min_nodes},
              {"max_nodes", shape.max_nodes},
              {"max_restarts", shape.max_restarts},
              {"worker_store", shape.agent_worker_store ? "agent" : "fresh"},
              {"host", shape.host_name},
              {"addr", shape.addr},
              {"static_rank", shape.static_rank}}
      .dump();
}

JobShape decode_job_shape(std::string_view text) {
  try {
    json j = common::parse_bounded_json(text);
    JobShape shape;
    const std::string backend = j.at("backend").get<std::string>();
    const auto named = backend_named(backend);
    if (!named || *named == RdzvBackend::etcd_v3) throw std::invalid_argument("unknown backend \"" + backend + "\"");
    shape.backend = *named;
    shape.min_nodes = j.at("min_nodes").get<int>();
    shape.max_nodes = j.at("max_nodes").get<int>();
    shape.max_restarts = j.at("max_restarts").get<int>();
    // Absent from shapes of ddprun before --worker-store: those gave every round a fresh store.
    const std::string worker_store = j.value("worker_store", std::string("fresh"));
    if (worker_store != "agent" && worker_store != "fresh") throw std::invalid_argument("unknown worker_store \"" + worker_store + "\"");
    shape.agent_worker_store = worker_store == "agent";
    shape.host_name = j.at("host").get<std::string>();
    shape.addr = j.at("addr").get<std::string>();
    shape.static_rank = j.at("static_rank").get<int>();
    if (shape.min_nodes < 1 || shape.max_nodes < shape.min_nodes) throw std::invalid_argument("bad node counts");
    return shape;
  } catch (const std::exception& error) {
    constexpr std::size_t kShown = 200;
    throw RendezvousError("malformed job shape in the store (" + std::string(error.what()) + "): \"" +
                          std::string(text.substr(0, kShown)) + (text.size() > kShown ? "...\"" : "\""));
  }
}

std::string job_shape_mismatch(const JobShape& stands, const JobShape& mine) {
  std::vector<std::string> names, says, started;
  for (const Flag& flag : kFlags) {
    std::string mine_spelled = flag.spelled(mine);
    std::string stands_spelled = flag.spelled(stands);
    if (mine_spelled == stands_spelled) continue;
    names.emplace_back(flag.name);
    says.push_back(std::move(mine_spelled));
    started.push_back(std::move(stands_spelled));
  }
  if (names.empty()) return {};
  auto spaced = [](const std::vector<std::string>& flags) {
    std::string text;
    for (const auto& flag : flags) text += (text.empty() ? "" : " ") + flag;
    return text;
  };
  return who(mine) + " says " + spaced(says) + ", but this job was started with " + spaced(started) + " by " +
         who(stands) + ": start every node of a job with the same " + listed(names);
}

}  // namespace ddprun::rendezvous

#include "rendezvous/round_record.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "common/bounded_json.hpp"
#include "rendezvous/rendezvous_error.hpp"

using nlohmann::json;

namespace ddprun::rendezvous {
namespace {

constexpr std::pair<EndKind, std::string_view> kEndKinds[] = {
    {EndKind::failure, "failure"}, {EndKind::fatal, "fatal"},   {EndKind::lost, "lost"},
    {EndKind::left, "left"},       {EndKind::joined, "joined"}, {EndKind::finished, "finished"},
};

json node_json(const NodeInfo& node) {
  return json{{"id", node.id},
              {"host", node.host_name},
              {"addr", node.addr},
              {"nproc", node.nproc},
              {"store_port", node.store_port},
              {"probe_port", node.probe_port},
              {"previous_rank", node.previous_rank},
              {"static_rank", node.static_rank}};
}

NodeInfo node_from(const json& j) {
  NodeInfo node;
  node.id = j.at("id").get<std::string>();
  node.host_name = j.at("host").get<std::string>();
  node.addr = j.at("addr").get<std::string>();
  if (!j.at("nproc").is_number_integer()) throw std::invalid_argument("\"nproc\" is not an integer");
  node.nproc = j.at("nproc").get<int>();
  node.store_port = j.at("store_port").get<int>();
  node.probe_port = j.at("probe_port").get<int>();
  node.previous_rank = j.at("previous_rank").get<int>();
  node.static_rank = j.at("static_rank").get<int>();
  if (node.id.empty() || node.nproc < 1 || node.store_port < 0 || node.store_port > 65535 ||
      node.probe_port < 0 || node.probe_port > 65535) {
    throw std::invalid_argument("a node with an empty id, no workers or a bad port");
  }
  return node;
}

/// Parses `text` with `read`; any failure is the one error the caller can act on.
template <class Read>
auto decode(std::string_view text, std::string_view what, Read read) {
  try {
    return read(common::parse_bounded_json(text));
  } catch (const std::exception& error) {
    constexpr std::size_t kShown = 200;
    throw RendezvousError("malformed " + std::string(what) + " in the store (" + error.what() + "): \"" +
                          std::string(text.substr(0, kShown)) + (text.size() > kShown ? "...\"" : "\""));
  }
}

RoundDecision decide_static(RoundDecision decision, const std::vector<NodeInfo>& joined) {
  std::map<int, std::vector<const NodeInfo*>> by_rank;
  for (const auto& node : joined) by_rank[node.static_rank].push_back(&node);
  const int n = static_cast<int>(joined.size());
  for (const auto& [rank, nodes] : by_rank) {
    if (nodes.size() > 1) {
      std::string names;
      for (const NodeInfo* node : nodes) {
        if (!names.empty()) names += " and ";
        names += node->describe();
      }
      decision.error = names + " were all started with --node-rank=" + std::to_string(rank) +
                       "; give each node its own rank in 0.." + std::to_string(n - 1);
      return decision;
    }
    if (rank < 0 || rank >= n) {
      decision.error = nodes.front()->describe() + " was started with --node-rank=" + std::to_string(rank) +
                       ", outside 0.." + std::to_string(n - 1);
      return decision;
    }
  }
  for (const auto& [rank, nodes] : by_rank) decision.nodes.push_back(*nodes.front());
  return decision;
}

RoundDecision decide_dynamic(RoundDecision decision, const std::vector<NodeInfo>& joined) {
  const int n = static_cast<int>(joined.size());
  std::vector<int> rank_of(joined.size(), -1);
  std::vector<bool> taken(joined.size(), false);
  // Keepers first: the earliest joiner wins a contested previous rank.
  for (std::size_t i = 0; i < joined.size(); ++i) {
    int previous = joined[i].previous_rank;
    if (previous >= 0 && previous < n && !taken[static_cast<std::size_t>(previous)]) {
      rank_of[i] = previous;
      taken[static_cast<std::size_t>(previous)] = true;
    }
  }
  // The others in order of previous rank (new nodes last), then join order.
  std::vector<std::size_t> others;
  for (std::size_t i = 0; i < joined.size(); ++i) {
    if (rank_of[i] < 0) others.push_back(i);
  }
  std::stable_sort(others.begin(), others.end(), [&](std::size_t a, std::size_t b) {
    auto key = [&](std::size_t i) { return joined[i].previous_rank < 0 ? INT32_MAX : joined[i].previous_rank; };
    return key(a) < key(b);
  });
  int next_free = 0;
  for (std::size_t i : others) {
    while (taken[static_cast<std::size_t>(next_free)]) ++next_free;
    rank_of[i] = next_free;
    taken[static_cast<std::size_t>(next_free)] = true;
  }
  decision.nodes.resize(joined.size());
  for (std::size_t i = 0; i < joined.size(); ++i) decision.nodes[static_cast<std::size_t>(rank_of[i])] = joined[i];
  return decision;
}

}  // namespace

std::string NodeInfo::describe() const { return host_name + " (" + addr + ")"; }

int RoundDecision::world_size() const {
  return std::accumulate(nodes.begin(), nodes.end(), 0, [](int sum, const NodeInfo& node) { return sum + node.nproc; });
}

int RoundDecision::rank_base(int group_rank) const {
  int base = 0;
  for (int i = 0; i < group_rank && i < static_cast<int>(nodes.size()); ++i) base += nodes[static_cast<std::size_t>(i)].nproc;
  return base;
}

int RoundDecision::group_rank_of(std::string_view id) const {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

std::string_view end_kind_name(EndKind kind) {
  for (const auto& [k, name] : kEndKinds) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::string encode_node(const NodeInfo& node) { return node_json(node).dump(); }

std::string encode_decision(const RoundDecision& decision) {
  json nodes = json::array();
  for (const auto& node : decision.nodes) nodes.push_back(node_json(node));
  return json{{"round", decision.round}, {"restart_count", decision.restart_count}, {"nodes", nodes}, {"error", decision.error}}
      .dump();
}

std::string encode_end(const RoundEnd& end) {
  return json{{"kind", end_kind_name(end.kind)}, {"node", end.node}, {"message", end.message}}.dump();
}

NodeInfo decode_node(std::string_view text) {
  return decode(text, "node record", [](const json& j) { return node_from(j); });
}

RoundDecision decode_decision(std::string_view text) {
  return decode(text, "round decision", [](const json& j) {
    RoundDecision decision;
    decision.round = j.at("round").get<int>();
    decision.restart_count = j.at("restart_count").get<int>();
    decision.error = j.at("error").get<std::string>();
    if (!j.at("nodes").is_array()) throw std::invalid_argument("\"nodes\" is not an array");
    for (const auto& node : j.at("nodes")) decision.nodes.push_back(node_from(node));
    return decision;
  });
}

RoundEnd decode_end(std::string_view text) {
  return decode(text, "round end", [](const json& j) {
    RoundEnd end;
    std::string kind = j.at("kind").get<std::string>();
    auto it = std::find_if(std::begin(kEndKinds), std::end(kEndKinds), [&](const auto& k) { return k.second == kind; });
    if (it == std::end(kEndKinds)) throw std::invalid_argument("unknown kind \"" + kind + "\"");
    end.kind = it->first;
    end.node = j.at("node").get<std::string>();
    end.message = j.at("message").get<std::string>();
    return end;
  });
}

RoundDecision decide_round(int round, int restart_count, const std::vector<NodeInfo>& joined, bool is_static) {
  RoundDecision decision;
  decision.round = round;
  decision.restart_count = restart_count;
  return is_static ? decide_static(std::move(decision), joined) : decide_dynamic(std::move(decision), joined);
}

const NodeInfo* other_holder_of_rank(const std::vector<NodeInfo>& nodes, const NodeInfo& self) {
  if (self.static_rank < 0) return nullptr;
  for (const auto& node : nodes) {
    if (node.static_rank == self.static_rank && node.id != self.id) return &node;
  }
  return nullptr;
}

std::string rank_taken_message(int rank, const NodeInfo& holder, const std::string& how) {
  return "node rank " + std::to_string(rank) + " is taken by " + holder.describe() + ", which " + how +
         ": give each node of the job its own --node-rank";
}

}  // namespace ddprun::rendezvous

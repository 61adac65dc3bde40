// Round records: what the store holds survives a round trip, what another program wrote there is
// refused, and the rank assignment keeps its rules without any store.
#include "rendezvous/round_record.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/rendezvous_error.hpp"

using namespace ddprun::rendezvous;
using nlohmann::json;

namespace {

const std::vector<EndKind> kAllKinds = {EndKind::failure, EndKind::fatal,  EndKind::lost,
                                        EndKind::left,    EndKind::joined, EndKind::finished};

NodeInfo node(std::string id, int previous_rank = -1, int static_rank = -1, int nproc = 1) {
  NodeInfo info;
  info.host_name = "host-" + id;
  info.addr = "10.0.0." + std::to_string(id.size() + id.back());
  info.id = std::move(id);
  info.nproc = nproc;
  info.store_port = 40000;
  info.previous_rank = previous_rank;
  info.static_rank = static_rank;
  return info;
}

/// The ids of a decision's nodes, in group-rank order.
std::vector<std::string> ids(const RoundDecision& decision) {
  std::vector<std::string> out;
  for (const auto& info : decision.nodes) out.push_back(info.id);
  return out;
}

/// Every variant of a valid record with one top-level field removed, and with one field's value
/// replaced by a value of another JSON type (null included: nlohmann iterates null as empty).
std::vector<std::string> mutilated(const std::string& valid) {
  std::vector<std::string> out;
  json record = json::parse(valid);
  for (const auto& [key, value] : record.items()) {
    json without = record;
    without.erase(key);
    out.push_back(without.dump());
    for (json other : {value.is_string() ? json(7) : json("seven"), json(nullptr), json::object()}) {
      json retyped = record;
      retyped[key] = other;
      out.push_back(retyped.dump());
    }
  }
  return out;
}

}  // namespace

TEST(NodeRecord, RoundTrips) {
  NodeInfo info = node("a");
  info.host_name = "gpu \"7\" \\ ü";
  info.addr = "fd00::2";
  info.nproc = 8;
  info.store_port = 65535;
  info.previous_rank = 3;
  info.static_rank = 1;
  EXPECT_EQ(decode_node(encode_node(info)), info);
}

TEST(NodeRecord, NodeWithoutIdOrWorkersIsRefused) {
  NodeInfo no_id = node("a");
  no_id.id.clear();
  EXPECT_THROW(decode_node(encode_node(no_id)), RendezvousError);
  NodeInfo no_workers = node("a");
  no_workers.nproc = 0;
  EXPECT_THROW(decode_node(encode_node(no_workers)), RendezvousError);
}

TEST(NodeRecord, DescribeNamesHostAndAddress) {
  NodeInfo info = node("a");
  EXPECT_EQ(info.describe(), info.host_name + " (" + info.addr + ")");
}

TEST(DecisionRecord, RoundTrips) {
  RoundDecision decision;
  decision.round = 4;
  decision.restart_count = 2;
  decision.nodes = {node("a", 0, -1, 2), node("b", 1, -1, 3)};
  decision.error = "ranks: \"x\"";
  RoundDecision back = decode_decision(encode_decision(decision));
  EXPECT_EQ(back.round, 4);
  EXPECT_EQ(back.restart_count, 2);
  EXPECT_EQ(back.nodes, decision.nodes);
  EXPECT_EQ(back.error, decision.error);
}

TEST(EndRecord, RoundTripsEveryKind) {
  std::set<std::string_view> names;
  for (EndKind kind : kAllKinds) {
    RoundEnd end{kind, "node-" + std::string(end_kind_name(kind)), "worker 3 exited with 1"};
    EXPECT_EQ(decode_end(encode_end(end)), end) << end_kind_name(kind);
    EXPECT_FALSE(end_kind_name(kind).empty());
    names.insert(end_kind_name(kind));
  }
  EXPECT_EQ(names.size(), kAllKinds.size()) << "two kinds share a name";
}

TEST(EndKinds, OnlyFailureUsesARestartAndFatalOrFinishedEndTheJob) {
  for (EndKind kind : kAllKinds) {
    EXPECT_EQ(uses_a_restart(kind), kind == EndKind::failure) << end_kind_name(kind);
    EXPECT_EQ(ends_the_job(kind), kind == EndKind::fatal || kind == EndKind::finished) << end_kind_name(kind);
  }
}

TEST(Records, NotJsonIsRefused) {
  for (std::string text : {"", "not json", "{\"id\":", "[1,2]", "42", "null"}) {
    EXPECT_THROW(decode_node(text), RendezvousError) << text;
    EXPECT_THROW(decode_decision(text), RendezvousError) << text;
    EXPECT_THROW(decode_end(text), RendezvousError) << text;
  }
}

TEST(Records, EmptyObjectIsRefused) {
  EXPECT_THROW(decode_node("{}"), RendezvousError);
  EXPECT_THROW(decode_decision("{}"), RendezvousError);
  EXPECT_THROW(decode_end("{}"), RendezvousError);
}

TEST(Records, MissingOrMistypedFieldsAreRefused) {
  NodeInfo info = node("a", 1, -1, 2);
  for (const auto& text : mutilated(encode_node(info))) EXPECT_THROW(decode_node(text), RendezvousError) << text;

  RoundDecision decision;
  decision.round = 1;
  decision.nodes = {info};
  for (const auto& text : mutilated(encode_decision(decision))) {
    EXPECT_THROW(decode_decision(text), RendezvousError) << text;
  }
  // A malformed node inside a decision is as bad as a malformed decision.
  for (const auto& bad_node : mutilated(encode_node(info))) {
    json record = json::parse(encode_decision(decision));
    for (auto& [key, value] : record.items()) {
      if (value.is_array()) value = json::array({json::parse(bad_node)});
    }
    EXPECT_THROW(decode_decision(record.dump()), RendezvousError) << record.dump();
  }

  RoundEnd end{EndKind::lost, "b", "b stopped heart-beating"};
  for (const auto& text : mutilated(encode_end(end))) EXPECT_THROW(decode_end(text), RendezvousError) << text;
}

TEST(Records, UnknownEndKindIsRefused) {
  json record = json::parse(encode_end(RoundEnd{EndKind::failure, "b", "m"}));
  bool replaced = false;
  for (auto& [key, value] : record.items()) {
    if (value == std::string(end_kind_name(EndKind::failure))) {
      value = "exploded";
      replaced = true;
    }
  }
  ASSERT_TRUE(replaced) << "the kind is not stored by its name: " << record.dump();
  EXPECT_THROW(decode_end(record.dump()), RendezvousError);
}

TEST(Records, DecoderMessagesSayTheStoreHoldsSomethingMalformed) {
  try {
    decode_node("not json");
    FAIL();
  } catch (const RendezvousError& error) {
    EXPECT_NE(std::string(error.what()).find("malformed"), std::string::npos) << error.what();
  }
}

TEST(DecideStatic, RanksByStaticRankRegardlessOfJoinOrder) {
  RoundDecision decision = decide_round(1, 0, {node("c", -1, 2), node("a", -1, 0), node("b", -1, 1)}, true);
  EXPECT_EQ(decision.error, "");
  EXPECT_EQ(ids(decision), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(decision.round, 1);
  EXPECT_EQ(decision.restart_count, 0);
}

TEST(DecideStatic, StaticRankWinsOverPreviousRank) {
  RoundDecision decision = decide_round(2, 1, {node("a", 1, 0), node("b", 0, 1)}, true);
  EXPECT_EQ(decision.error, "");
  EXPECT_EQ(ids(decision), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(decision.restart_count, 1);
}

TEST(DecideStatic, DuplicateRankNamesBothNodes) {
  NodeInfo first = node("a", -1, 1);
  NodeInfo second = node("b", -1, 1);
  RoundDecision decision = decide_round(1, 0, {node("z", -1, 0), first, second}, true);
  ASSERT_NE(decision.error, "");
  EXPECT_NE(decision.error.find(first.describe()), std::string::npos) << decision.error;
  EXPECT_NE(decision.error.find(second.describe()), std::string::npos) << decision.error;
}

TEST(DecideStatic, GapInRanksIsAnError) {
  EXPECT_NE(decide_round(1, 0, {node("a", -1, 0), node("b", -1, 2)}, true).error, "");
}

TEST(DecideStatic, MissingStaticRankIsAnError) {
  EXPECT_NE(decide_round(1, 0, {node("a", -1, 0), node("b", -1, -1)}, true).error, "");
}

TEST(DecideDynamic, FreshNodesRankInJoinOrder) {
  RoundDecision decision = decide_round(0, 0, {node("c"), node("a"), node("b")}, false);
  EXPECT_EQ(decision.error, "");
  EXPECT_EQ(ids(decision), (std::vector<std::string>{"c", "a", "b"}));
}

TEST(DecideDynamic, SurvivorsKeepTheirRanks) {
  RoundDecision decision = decide_round(3, 1, {node("b", 1), node("new"), node("a", 0)}, false);
  EXPECT_EQ(decision.error, "");
  EXPECT_EQ(ids(decision), (std::vector<std::string>{"a", "b", "new"}));
  EXPECT_EQ(decision.round, 3);
  EXPECT_EQ(decision.restart_count, 1);
}

TEST(DecideDynamic, SurvivorBeyondTheNewSizeTakesTheFreeRank) {
  // Node of rank 1 was lost: rank 2 cannot stay in a round of 2.
  RoundDecision decision = decide_round(2, 0, {node("x", 2), node("y", 0)}, false);
  EXPECT_EQ(ids(decision), (std::vector<std::string>{"y", "x"}));
}

TEST(DecideDynamic, EarlierJoinerKeepsAContestedRank) {
  EXPECT_EQ(ids(decide_round(2, 0, {node("p", 0), node("q", 0)}, false)), (std::vector<std::string>{"p", "q"}));
  EXPECT_EQ(ids(decide_round(2, 0, {node("q", 0), node("p", 0)}, false)), (std::vector<std::string>{"q", "p"}));
  // The loser fills a free rank ahead of new nodes, as a survivor.
  EXPECT_EQ(ids(decide_round(2, 0, {node("n"), node("p", 1), node("q", 1)}, false)),
            (std::vector<std::string>{"q", "p", "n"}));
}

TEST(DecideDynamic, NewNodesFillTheFreeRanksInJoinOrder) {
  RoundDecision decision = decide_round(2, 0, {node("n1"), node("s", 3), node("n2"), node("t", 0)}, false);
  EXPECT_EQ(ids(decision), (std::vector<std::string>{"t", "n1", "n2", "s"}));
}

TEST(DecideDynamic, DisplacedSurvivorsGoByPreviousRankThenNewNodes) {
  // Previous ranks 5 and 4 do not fit a round of 3: by previous rank, then the new node.
  RoundDecision decision = decide_round(2, 0, {node("n"), node("s5", 5), node("s4", 4)}, false);
  EXPECT_EQ(ids(decision), (std::vector<std::string>{"s4", "s5", "n"}));
}

TEST(DecideDynamic, StaticRanksAreIgnored) {
  RoundDecision decision = decide_round(0, 0, {node("a", -1, 1), node("b", -1, 0)}, false);
  EXPECT_EQ(decision.error, "");
  EXPECT_EQ(ids(decision), (std::vector<std::string>{"a", "b"}));
}

TEST(DecideDynamic, SameJoinsGiveTheSameDecision) {
  std::vector<NodeInfo> joins = {node("n1"), node("s", 7), node("t", 1), node("u", 1), node("n2")};
  RoundDecision once = decide_round(5, 2, joins, false);
  RoundDecision again = decide_round(5, 2, joins, false);
  EXPECT_EQ(once.nodes, again.nodes);
  // t keeps 1 over u (later joiner); s (7) does not fit; u and s by previous rank, then new nodes.
  EXPECT_EQ(ids(once), (std::vector<std::string>{"u", "t", "s", "n1", "n2"}));
}

TEST(RoundDecisionRanks, WorldSizeAndRankBaseWithUnevenNproc) {
  RoundDecision decision;
  decision.nodes = {node("a", -1, -1, 2), node("b", -1, -1, 3), node("c", -1, -1, 1)};
  EXPECT_EQ(decision.world_size(), 6);
  EXPECT_EQ(decision.rank_base(0), 0);
  EXPECT_EQ(decision.rank_base(1), 2);
  EXPECT_EQ(decision.rank_base(2), 5);
  EXPECT_EQ(decision.group_rank_of("a"), 0);
  EXPECT_EQ(decision.group_rank_of("c"), 2);
  EXPECT_EQ(decision.group_rank_of("nobody"), -1);
  EXPECT_EQ(RoundDecision{}.world_size(), 0);
}

TEST(StaticRankHolder, AnotherAgentWithTheSameRankHoldsIt) {
  const std::vector<NodeInfo> round = {node("a", -1, 0), node("b", -1, 1), node("c", -1, 2)};
  struct Case {
    NodeInfo self;
    const char* holder;  // nullptr: none
  };
  const std::vector<Case> cases = {
      {node("b", -1, 1), nullptr},  // itself, back in the round
      {node("b2", -1, 1), "b"},     // a second agent started with --node-rank=1
      {node("d", -1, 3), nullptr},  // a rank nobody holds
      {node("e", -1, -1), nullptr}, // dynamic: no static rank to hold
  };
  for (const auto& c : cases) {
    const NodeInfo* holder = other_holder_of_rank(round, c.self);
    if (!c.holder) {
      EXPECT_EQ(holder, nullptr) << c.self.id;
    } else {
      ASSERT_NE(holder, nullptr) << c.self.id;
      EXPECT_EQ(holder->id, c.holder);
    }
  }
}

TEST(StaticRankHolder, RefusalNamesTheRankAndItsHolder) {
  NodeInfo holder = node("a", -1, 1);
  holder.host_name = "gpu1";
  holder.addr = "10.0.0.1";
  EXPECT_EQ(rank_taken_message(1, holder, "joined round 0 of job 'j' first"),
            "node rank 1 is taken by gpu1 (10.0.0.1), which joined round 0 of job 'j' first: give each node of the "
            "job its own --node-rank");
}

// The job's shape: which nodes agree, and what a node that does not is told, whoever came first.
#include "rendezvous/job_shape.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rendezvous/rendezvous_error.hpp"

using namespace ddprun::rendezvous;

namespace {

JobShape shape(bool is_static, int min, int max, int max_restarts, std::string host, int static_rank) {
  JobShape s;
  s.backend = is_static ? RdzvBackend::static_ : RdzvBackend::c10d;
  s.min_nodes = min;
  s.max_nodes = max;
  s.max_restarts = max_restarts;
  s.addr = "10.0.0." + std::to_string(static_rank + 1);
  s.host_name = std::move(host);
  s.static_rank = is_static ? static_rank : -1;
  return s;
}

JobShape static_node(int nnodes, int node_rank, int max_restarts = 0) {
  return shape(true, nnodes, nnodes, max_restarts, "host" + std::to_string(node_rank), node_rank);
}

JobShape c10d_node(int min, int max, const std::string& host, int max_restarts = 0) {
  return shape(false, min, max, max_restarts, host, 0);
}

}  // namespace

TEST(JobShape, OfSettingsTakesTheNodeAndTheRules) {
  RendezvousSettings settings;
  settings.is_static = true;
  settings.min_nodes = settings.max_nodes = 3;
  settings.max_restarts = 2;
  NodeInfo node;
  node.id = "id";
  node.host_name = "gpu1";
  node.addr = "10.0.0.7";
  node.static_rank = 1;
  JobShape s = job_shape_of(settings, node);
  EXPECT_EQ(s.backend, RdzvBackend::static_);
  EXPECT_EQ(s.min_nodes, 3);
  EXPECT_EQ(s.max_nodes, 3);
  EXPECT_EQ(s.max_restarts, 2);
  EXPECT_EQ(s.host_name, "gpu1");
  EXPECT_EQ(s.addr, "10.0.0.7");
  EXPECT_EQ(s.static_rank, 1);
}

TEST(JobShape, RoundTrips) {
  for (const JobShape& s : {static_node(4, 3, 7), c10d_node(2, 8, "gpu \"x\" ü", 1)}) {
    JobShape back = decode_job_shape(encode_job_shape(s));
    EXPECT_EQ(encode_job_shape(back), encode_job_shape(s));
    EXPECT_EQ(back.host_name, s.host_name);
    EXPECT_EQ(back.static_rank, s.static_rank);
  }
}

TEST(JobShape, TheStoredBackendIsTheKindOfRounds) {
  // What every ddprun has stored: "static", or "c10d" for any rounds (etcd-v3's included).
  RendezvousSettings settings;
  NodeInfo node;
  for (bool is_static : {true, false}) {
    settings.is_static = is_static;
    const std::string text = encode_job_shape(job_shape_of(settings, node));
    EXPECT_NE(text.find(is_static ? R"("backend":"static")" : R"("backend":"c10d")"), std::string::npos) << text;
    EXPECT_EQ(decode_job_shape(text).backend, is_static ? RdzvBackend::static_ : RdzvBackend::c10d);
  }
}

TEST(JobShape, WhatDdprunDidNotWriteIsRefused) {
  // The plain text of an older ddprun, JSON without fields, impossible node counts; and etcd-v3,
  // which records its rounds as c10d's and is never a shape's backend.
  for (const char* text : {"static --nnodes=2", "{}",
                           R"({"backend":"slurm","min_nodes":1,"max_nodes":1,"max_restarts":0,"host":"h","addr":"a","static_rank":0})",
                           R"({"backend":"etcd-v3","min_nodes":1,"max_nodes":1,"max_restarts":0,"host":"h","addr":"a","static_rank":-1})",
                           R"({"backend":"c10d","min_nodes":3,"max_nodes":2,"max_restarts":0,"host":"h","addr":"a","static_rank":-1})"}) {
    try {
      decode_job_shape(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const RendezvousError& error) {
      EXPECT_NE(std::string(error.what()).find("malformed job shape in the store"), std::string::npos) << error.what();
    }
  }
}

TEST(JobShapeMismatch, NodesThatAgreeOnTheRulesAgreeWhoeverTheyAre) {
  EXPECT_EQ(job_shape_mismatch(static_node(2, 0), static_node(2, 1)), "");
  EXPECT_EQ(job_shape_mismatch(static_node(3, 2, 4), static_node(3, 0, 4)), "");
  EXPECT_EQ(job_shape_mismatch(c10d_node(2, 4, "a"), c10d_node(2, 4, "b")), "");
}

TEST(JobShapeMismatch, NamesBothNodesAndBothValues) {
  struct Case {
    const char* what;
    JobShape stands;
    JobShape mine;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"static --nnodes, the disagreeing node second", static_node(2, 0), static_node(3, 1),
       "node rank 1 on host1 (10.0.0.2) says --nnodes=3, but this job was started with --nnodes=2 by node rank 0 on "
       "host0 (10.0.0.1): start every node of a job with the same --nnodes"},
      {"static --nnodes, the disagreeing node first", static_node(3, 1), static_node(2, 0),
       "node rank 0 on host0 (10.0.0.1) says --nnodes=2, but this job was started with --nnodes=3 by node rank 1 on "
       "host1 (10.0.0.2): start every node of a job with the same --nnodes"},
      {"--max-restarts", static_node(2, 0, 0), static_node(2, 1, 3),
       "node rank 1 on host1 (10.0.0.2) says --max-restarts=3, but this job was started with --max-restarts=0 by node "
       "rank 0 on host0 (10.0.0.1): start every node of a job with the same --max-restarts"},
      {"both", static_node(2, 0, 1), static_node(4, 3, 0),
       "node rank 3 on host3 (10.0.0.4) says --nnodes=4 --max-restarts=0, but this job was started with --nnodes=2 "
       "--max-restarts=1 by node rank 0 on host0 (10.0.0.1): start every node of a job with the same --nnodes and "
       "--max-restarts"},
      {"c10d node counts", c10d_node(2, 4, "a"), c10d_node(2, 2, "b"),
       "node b (10.0.0.1) says --nnodes=2, but this job was started with --nnodes=2:4 by node a (10.0.0.1): start "
       "every node of a job with the same --nnodes"},
      {"backend only", static_node(2, 0), c10d_node(2, 2, "b"),
       "node b (10.0.0.1) says --rdzv-backend=c10d, but this job was started with --rdzv-backend=static by node rank "
       "0 on host0 (10.0.0.1): start every node of a job with the same --rdzv-backend"},
      {"everything", c10d_node(1, 3, "a", 2), static_node(2, 1, 0),
       "node rank 1 on host1 (10.0.0.2) says --rdzv-backend=static --nnodes=2 --max-restarts=0, but this job was "
       "started with --rdzv-backend=c10d --nnodes=1:3 --max-restarts=2 by node a (10.0.0.1): start every node of a "
       "job with the same --rdzv-backend, --nnodes and --max-restarts"},
  };
  for (const auto& c : cases) EXPECT_EQ(job_shape_mismatch(c.stands, c.mine), c.expected) << c.what;
}

// A job over ssh from the command line, by table: which options each host's agent gets, the
// per-host flags (node rank, store, slots), what the fleet's flags refuse, the launcher's verdicts.
#include "launcher/fleet/fleet_config.hpp"

#include <gtest/gtest.h>

#include "cli_parse.hpp"
#include "launcher/fleet/fleet_rule.hpp"
#include "launcher/cli/launch_config.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

TEST(WithoutFleetOptions, Table) {
  struct Row {
    Args in, out;
  };
  const std::vector<Row> rows{
      {{"--hostfile", "f", "--nproc-per-node", "2"}, {"--nproc-per-node", "2"}},
      {{"--hostfile=f", "--ssh-option", "A=b", "--ssh-option=C=d", "--exclude", "x", "--include=y"}, {}},
      {{"-H", "h:2", "-v"}, {"-v"}},
      {{"-Hh:2", "-v"}, {"-v"}},
      {{"-vH", "h", "-r3"}, {"-v", "-r3"}},
      {{"-vmHh"}, {"-vm"}},
      {{"-t", "3", "--ssh-port", "2222", "--env-export", "A,B", "--max-restarts=1"}, {"-t", "3", "--max-restarts=1"}},
  };
  for (const auto& row : rows) EXPECT_EQ(without_fleet_options(row.in), row.out) << joined(row.in);
}

TEST(FleetFromCommandLine, StaticRanksInHostOrder) {
  LaunchConfig config = parse({"-H", "a:2,u@b,c:3", "--nproc-per-node=4", "--ssh-port", "2222", "--ssh-option",
                               "StrictHostKeyChecking=no", "--ssh-option=IdentityFile=/k", "--env-export=NCCL_DEBUG",
                               "--max-restarts=1", "/bin/true", "x", "--y"});
  ASSERT_EQ(config.fleet.hosts.size(), 3u);
  EXPECT_EQ(config.topology.max_nodes, 3);
  EXPECT_EQ(config.master_addr, "a");
  EXPECT_EQ(config.fleet.ssh.port, 2222);
  EXPECT_EQ(config.fleet.ssh.options, (Args{"StrictHostKeyChecking=no", "IdentityFile=/k"}));
  EXPECT_EQ(config.fleet.exports, Args{"NCCL_DEBUG"});
  EXPECT_EQ(agent_argv(config, 0, "/d"), (Args{"/d", "--nproc-per-node=4", "--max-restarts=1", "--nnodes=3", "--node-rank=0",
                                               "--master-addr=a", "--nproc-per-node=2", "--stdin=none", "--", "/bin/true",
                                               "x", "--y"}));
  EXPECT_EQ(agent_argv(config, 1, "/d"), (Args{"/d", "--nproc-per-node=4", "--max-restarts=1", "--nnodes=3", "--node-rank=1",
                                               "--master-addr=a", "--stdin=none", "--", "/bin/true", "x", "--y"}));
}

TEST(FleetFromCommandLine, C10dMeetsAtTheFirstHost) {
  LaunchConfig config = parse({"-H", "a,b", "--rdzv-backend=c10d", "--nnodes=1:3", "--rdzv-id=j", "/bin/true"});
  EXPECT_EQ(endpoint_text(config), "a:29400");
  EXPECT_EQ(agent_argv(config, 1, "/d"), (Args{"/d", "--rdzv-backend=c10d", "--nnodes=1:3", "--rdzv-id=j",
                                               "--rdzv-endpoint=a:29400", "--stdin=none", "--", "/bin/true"}));
  LaunchConfig given = parse({"-H", "a,b", "--rdzv-backend=c10d", "--rdzv-endpoint=z:1", "/bin/true"});
  EXPECT_EQ(endpoint_text(given), "z:1");
  EXPECT_EQ(given.topology.max_nodes, 2);
}

TEST(FleetFromCommandLine, NoHostsNoFleet) {
  EXPECT_TRUE(parse({"/bin/true"}).fleet.hosts.empty());
}

TEST(FleetFromCommandLine, Refusals) {
  struct Row {
    Args args;
    Environ env;
    std::string error;
  };
  const std::string tail = " (see ddprun --help)";
  const std::vector<Row> rows{
      {{"--include=a", "/bin/true"}, kNoPath, "--include: needs --hostfile FILE or -H HOST[:SLOTS],..."},
      {{"--ssh-option=A=b", "/bin/true"}, kNoPath, "--ssh-option: needs --hostfile FILE or -H HOST[:SLOTS],..."},
      {{"-H", "a,b", "--node-rank=1", "--nnodes=2", "/bin/true"}, kNoPath,
       "--node-rank: cannot be used with --hosts (each host's node rank is its place in the list)"},
      {{"-H", "a,b", "--nnodes=3", "/bin/true"}, kNoPath,
       "--nnodes: asks for 3 nodes, but --hosts gives 2 hosts (leave --nnodes out: it is the number of hosts)"},
      {{"-H", "a,b,c", "--rdzv-backend=c10d", "--nnodes=1:2", "/bin/true"}, kNoPath,
       "--nnodes: allows at most 2 nodes, but --hosts gives 3 hosts"},
      {{"-H", "a", "--hostfile=/nonexistent/h", "/bin/true"}, kNoPath,
       "--hosts: cannot be used with --hostfile (give the hosts one way)"},
      {{"--hostfile=/nonexistent/h", "/bin/true"}, kNoPath, "--hostfile /nonexistent/h: cannot read: No such file or directory"},
      // Issue 25: a folder was read as an empty file ("lists no host"); its cause is named instead.
      {{"--hostfile=/tmp", "/bin/true"}, kNoPath, "--hostfile /tmp: cannot read: it is a folder, not a file"},
      {{"--hostfile", "/", "/bin/true"}, kNoPath, "--hostfile /: cannot read: it is a folder, not a file"},
      {{"-H", "a", "--standalone", "/bin/true"}, kNoPath, "--hosts: cannot be used with --standalone (one node)"},
      {{"-H", "a", "--ssh-port=0", "/bin/true"}, kNoPath, "--ssh-port: \"0\" is not a port number (1..65535)"},
      {{"-H", "a", "--ssh-option=NoEquals", "/bin/true"}, kNoPath,
       "--ssh-option: \"NoEquals\" is not KEY=VALUE (an ssh -o option, e.g. StrictHostKeyChecking=no)"},
      {{"-H", "a", "/bin/true"}, {{"DDPRUN_SSH_ALIVE_TIMEOUT", "0"}},
       "DDPRUN_SSH_ALIVE_TIMEOUT=0: is not a number of seconds (an integer >= 1)"},
  };
  for (const auto& row : rows) EXPECT_EQ(usage_error(row.args, row.env), row.error) << joined(row.args);
}

TEST(FleetRule, NodeEndsAndExitStatus) {
  EXPECT_EQ(describe_node_status(0), "exit 0");
  EXPECT_EQ(describe_node_status(1), "exit 1");
  EXPECT_EQ(describe_node_status(255), "its ssh connection failed or was lost (ssh exit 255)");
  EXPECT_EQ(describe_node_status(129), "ended by SIGHUP (exit 129)");
  EXPECT_EQ(describe_node_end({2, "10.0.0.3", 1}), "node 2 (10.0.0.3): exit 1");
  EXPECT_EQ(fleet_exit_status(std::nullopt, {{0, "a", 0}, {1, "b", 0}}), 0);
  EXPECT_EQ(fleet_exit_status(std::nullopt, {{0, "a", 0}, {1, "b", 255}}), 1);
  EXPECT_EQ(fleet_exit_status(SIGINT, {{0, "a", 129}}), 130);
}

TEST(FleetRule, AnElasticJobGoesOnWithoutALostNodeThatDoesNotHostTheStore) {
  const FleetShape c10d{true, 2, 3, 0};     // the store on node 0's agent
  const FleetShape etcd{true, 2, 3, std::nullopt};
  const FleetShape fixed{false, 3, 3, std::nullopt};
  using V = NodeEndVerdict;
  struct Row {
    const char* what;
    NodeEnd end;
    FleetShape shape;
    int others;  ///< running, or finished well
    V verdict;
  };
  const std::vector<Row> rows = {
      {"a node that finished", {2, "c", 0}, c10d, 2, V::finished},
      {"ssh lost, elastic, MIN left", {2, "c", 255}, c10d, 2, V::go_on_without},
      {"the agent died of SIGKILL", {1, "b", 137}, c10d, 2, V::go_on_without},
      {"the agent judged the job failed", {2, "c", 1}, c10d, 2, V::job_failed},
      {"the store's host lost", {0, "a", 255}, c10d, 2, V::job_failed},
      {"etcd-v3 has no store host", {0, "a", 255}, etcd, 2, V::go_on_without},
      {"fewer than MIN left", {2, "c", 255}, c10d, 1, V::job_failed},
      {"a static job", {2, "c", 255}, fixed, 2, V::job_failed},
  };
  for (const auto& row : rows) EXPECT_EQ(judge_node_end(row.end, row.shape, row.others), row.verdict) << row.what;
  EXPECT_EQ(describe_going_on(c10d, 2), "; the job goes on with the other 2 nodes (--nnodes=2:3)");
  EXPECT_EQ(describe_going_on(etcd, 1), "; the job goes on with the other 1 node (--nnodes=2:3)");
}

}  // namespace
}  // namespace ddprun::launcher

// parse_command_line resolves the job once into typed values: the rendezvous backend, the
// endpoints (the default port), --rdzv-conf into RendezvousSettings, the topology, the devices of
// each local rank and the store token. By table; every refusal is a UsageError naming its source.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include "cli_parse.hpp"
#include "launcher/cli/cli_options.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;
using namespace std::chrono_literals;
using rendezvous::Endpoint;

/// `args` with a program after them.
LaunchConfig parsed(Args args, const Environ& env = kNoPath, const HostFacts& host = kCpuHost) {
  args.push_back("t.py");
  return parse(args, env, host);
}

std::string refusal(Args args, const Environ& env = kNoPath, const HostFacts& host = kCpuHost) {
  args.push_back("t.py");
  return usage_error(args, env, host);
}

TEST(CliResolution, BackendNames) {
  struct Row {
    Args args;
    Environ env;
    std::optional<RdzvBackend> backend;  ///< nothing: refused with `message`
    std::string message;
  };
  const Row rows[] = {
      {{}, {}, RdzvBackend::static_, ""},
      {{"--rdzv-backend", "static"}, {}, RdzvBackend::static_, ""},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "h"}, {}, RdzvBackend::c10d, ""},
      {{"--rdzv-endpoint", "h"}, {{"PET_RDZV_BACKEND", "c10d"}}, RdzvBackend::c10d, ""},
      {{"--standalone"}, {}, RdzvBackend::c10d, ""},
      {{"--rdzv-backend", "etcd-v3", "--rdzv-endpoint", "h1:2379,h2"}, {}, RdzvBackend::etcd_v3, ""},
      {{"--rdzv-backend", "etcd-v3"},
       {},
       std::nullopt,
       "--rdzv-backend=etcd-v3 needs --rdzv-endpoint HOST[:PORT][,HOST[:PORT]...] (the etcd members)"},
      {{"--rdzv-backend", "etcd-v3", "--rdzv-endpoint", "h1", "--rdzv-conf", "lease_ttl=1"},
       {},
       std::nullopt,
       "--rdzv-endpoint: \"h1\" is not an etcd-v3 rendezvous (lease_ttl=1 is not an integer number of seconds in "
       "2..3600)"},
      // --rdzv-conf's etcd keys are read once, at the flag; only etcd-v3 judges them, after its endpoints.
      {{"--rdzv-backend", "etcd-v3", "--rdzv-endpoint", "h1", "--rdzv-conf", "protocol=grpc,lease_ttl=1"},
       {},
       std::nullopt,
       "--rdzv-endpoint: \"h1\" is not an etcd-v3 rendezvous (protocol=grpc is not http or https)"},
      {{"--rdzv-backend", "etcd-v3", "--rdzv-endpoint", "h1", "--rdzv-conf", "lease_ttl=1,lease_ttl=3"}, {}, RdzvBackend::etcd_v3, ""},
      {{"--rdzv-backend", "etcd-v3", "--rdzv-endpoint", "", "--rdzv-conf", "lease_ttl=1"},
       {},
       std::nullopt,
       "--rdzv-backend=etcd-v3 needs --rdzv-endpoint HOST[:PORT][,HOST[:PORT]...] (the etcd members)"},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "h", "--rdzv-conf", "protocol=grpc,lease_ttl=1,cert=/c.pem"},
       {},
       RdzvBackend::c10d,
       ""},
      {{"--rdzv-backend", "etcd"}, {}, std::nullopt,
       "--rdzv-backend: \"etcd\" is torchrun's backend for etcd's v2 API, which etcd 3.4 turns off; ddprun's etcd-v3 "
       "speaks etcd's v3 API with the same --rdzv-endpoint and --rdzv-conf keys"},
      {{"--rdzv-backend", "C10D"}, {}, std::nullopt, "--rdzv-backend: \"C10D\" is not a rendezvous backend (static, c10d, etcd-v3)"},
      {{"--rdzv-backend="}, {}, std::nullopt, "--rdzv-backend: \"\" is not a rendezvous backend (static, c10d, etcd-v3)"},
      {{},
       {{"PET_RDZV_BACKEND", "etcd-v2"}},
       std::nullopt,
       "--rdzv-backend (from PET_RDZV_BACKEND): \"etcd-v2\" is torchrun's backend for etcd's v2 API, which etcd 3.4 "
       "turns off; ddprun's etcd-v3 speaks etcd's v3 API with the same --rdzv-endpoint and --rdzv-conf keys"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(joined(row.args));
    Environ env = kNoPath;
    env.insert(row.env.begin(), row.env.end());
    if (row.backend) {
      LaunchConfig c = parsed(row.args, env);
      EXPECT_EQ(c.rdzv_backend, *row.backend);
      EXPECT_EQ(c.rendezvous.is_static, *row.backend == RdzvBackend::static_);
    } else {
      EXPECT_EQ(refusal(row.args, env), row.message);
    }
  }
  EXPECT_EQ(backend_name(RdzvBackend::static_), "static");
  EXPECT_EQ(backend_name(RdzvBackend::c10d), "c10d");
  EXPECT_EQ(backend_name(RdzvBackend::etcd_v3), "etcd-v3");
  // etcd-v3: every member, the first as the endpoint this node finds its address toward.
  LaunchConfig etcd = parsed({"--rdzv-backend", "etcd-v3", "--rdzv-endpoint", "h1:2379,h2:2380",
                              "--rdzv-conf", "key_prefix=/a,lease_ttl=4"},
                             kNoPath);
  ASSERT_TRUE(etcd.etcd);
  EXPECT_EQ(etcd.etcd->endpoints, (std::vector<Endpoint>{{"h1", 2379}, {"h2", 2380}}));
  EXPECT_EQ(etcd.etcd->key_prefix, "/a/");
  EXPECT_EQ(etcd.store_endpoint, (Endpoint{"h1", 2379}));
  EXPECT_TRUE(etcd.topology.multi_node);
}

TEST(CliResolution, EndpointsAndTheDefaultPort) {
  struct Row {
    Args args;
    std::optional<Endpoint> rdzv_endpoint;
    Endpoint store;  ///< where a multi-node job's rendezvous store listens
  };
  const Row rows[] = {
      {{"--nnodes", "2"}, std::nullopt, {"127.0.0.1", 29500}},
      {{"--nnodes", "2", "--master-addr", "node0", "--master-port", "1234"}, std::nullopt, {"node0", 1234}},
      // A static job meets at the master whatever the endpoint says (as before).
      {{"--nnodes", "2", "--rdzv-endpoint", "head:7"}, Endpoint{"head", 7}, {"127.0.0.1", 29500}},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "head"}, Endpoint{"head", 29400}, {"head", 29400}},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "head:1"}, Endpoint{"head", 1}, {"head", 1}},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "[::1]"}, Endpoint{"::1", 29400}, {"::1", 29400}},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "::1:5"}, Endpoint{"::1", 5}, {"::1", 5}},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", " 10.0.0.1 "}, Endpoint{"10.0.0.1", 29400}, {"10.0.0.1", 29400}},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "h:0"}, Endpoint{"h", 0}, {"h", 0}},
      {{"--standalone", "--rdzv-endpoint", "ignored:1"}, Endpoint{"localhost", 0}, {"localhost", 0}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(joined(row.args));
    LaunchConfig c = parsed(row.args);
    EXPECT_EQ(c.rdzv_endpoint, row.rdzv_endpoint);
    EXPECT_EQ(c.store_endpoint, row.store);
  }
  EXPECT_EQ(kDefaultRdzvPort, 29400);
}

TEST(CliResolution, C10dNeedsAnEndpoint) {
  const std::string message =
      "--rdzv-backend=c10d needs --rdzv-endpoint HOST[:PORT] (the machine that hosts the store)";
  EXPECT_EQ(refusal({"--rdzv-backend", "c10d"}), message);
  EXPECT_EQ(refusal({"--nnodes", "2", "--rdzv-backend", "c10d"}), message);
  EXPECT_EQ(refusal({"--rdzv-backend", "c10d", "--rdzv-endpoint="}), message);  // a template's empty value
  EXPECT_EQ(refusal({}, {{"PET_RDZV_BACKEND", "c10d"}, {"PATH", "/nonexistent/ddprun"}}), message);
  EXPECT_EQ(refusal({"--standalone", "--rdzv-backend", "c10d"}), "");  // its own store
}

TEST(CliResolution, RdzvConfKeysBecomeSettings) {
  LaunchConfig c = parsed({"--nnodes", "2", "--rdzv-conf",
                           "join_timeout=1,last_call_timeout=2,close_timeout=3,keep_alive_interval=4,"
                           "keep_alive_max_attempt=5,heartbeat_timeout=6,read_timeout=7,timeout=8,is_host=yes,"
                           "store_type=file"});
  const rendezvous::RendezvousSettings& s = c.rendezvous;
  EXPECT_EQ(s.join_timeout, 1s);
  EXPECT_EQ(s.last_call_timeout, 2s);
  EXPECT_EQ(s.close_timeout, 3s);
  EXPECT_EQ(s.keep_alive_interval, 4s);
  EXPECT_EQ(s.keep_alive_max_attempt, 5);
  EXPECT_EQ(s.heartbeat_timeout, 6s);
  EXPECT_EQ(s.read_timeout, 7s);
  EXPECT_EQ(s.timeout, 8s);
  EXPECT_EQ(s.is_host, true);
  EXPECT_EQ(c.rdzv_conf.given.at("store_type"), "file");  // other keys: kept as given, unchecked
  // The last of a repeated key wins, in the settings as in the map shown by -v.
  LaunchConfig repeated = parsed({"--rdzv-conf", "join_timeout=1,join_timeout=0.25"});
  EXPECT_EQ(repeated.rendezvous.join_timeout, 250ms);
  EXPECT_EQ(repeated.rdzv_conf.given.at("join_timeout"), "0.25");
  // Unset: torchrun's defaults.
  EXPECT_EQ(parsed({}).rendezvous.join_timeout, 600s);
  EXPECT_FALSE(parsed({}).rendezvous.is_host);
}

TEST(CliResolution, RdzvConfBadValuesAreUsageErrorsNamingTheFlag) {
  struct Row {
    std::string conf;
    std::string message;  ///< after "--rdzv-conf: "
  };
  const Row rows[] = {
      {"join_timeout", "\"join_timeout\" gives no value for join_timeout (write join_timeout=VALUE)"},
      {"=5", "\"=5\" is not K=V,K=V (an entry has no key)"},
      {"join_timeout=-1", "\"join_timeout=-1\" sets join_timeout to -1, not a number >= 0"},
      {"read_timeout=soon", "\"read_timeout=soon\" sets read_timeout to soon, not a number >= 0"},
      {"a=1, timeout = nan", "\"a=1, timeout = nan\" sets timeout to nan, not a number >= 0"},
      {"is_host=maybe", "\"is_host=maybe\" sets is_host to maybe, not a boolean"},
      {"keep_alive_interval=0", "\"keep_alive_interval=0\" sets keep_alive_interval to 0, not a number > 0"},
      {"heartbeat_timeout=0.0001", "\"heartbeat_timeout=0.0001\" sets heartbeat_timeout to 0.0001, not at least 0.001 (1 ms)"},
      {"keep_alive_max_attempt=2.5", "\"keep_alive_max_attempt=2.5\" sets keep_alive_max_attempt to 2.5, not an integer >= 1"},
      {"keep_alive_max_attempt=x", "\"keep_alive_max_attempt=x\" sets keep_alive_max_attempt to x, not a number >= 0"},
      // In order: the first bad entry is the one named, even when a later one repeats its key.
      {"timeout=-1,join_timeout=x,timeout=1", "\"timeout=-1,join_timeout=x,timeout=1\" sets timeout to -1, not a number >= 0"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.conf);
    EXPECT_EQ(refusal({"--nnodes", "2", "--rdzv-conf", row.conf}), "--rdzv-conf: " + row.message);
  }
  EXPECT_EQ(refusal({}, {{"PET_RDZV_CONF", "is_host=2"}, {"PATH", "/nonexistent/ddprun"}}),
            "--rdzv-conf (from PET_RDZV_CONF): \"is_host=2\" sets is_host to 2, not a boolean");
}

TEST(CliResolution, TopologyAndRendezvousRules) {
  struct Row {
    Args args;
    bool multi_node;
    int static_rank;
    bool agent_worker_store;
  };
  const Row rows[] = {
      {{}, false, 0, true},
      {{"--standalone"}, false, -1, false},
      {{"--nnodes", "2", "--node-rank", "1"}, true, 1, true},
      {{"--nnodes", "1:2"}, true, 0, true},
      {{"--nnodes", "2", "--worker-store", "fresh"}, true, 0, false},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "h"}, true, -1, false},
      {{"--nnodes", "2:4", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h", "--node-rank", "3"}, true, -1, false},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(joined(row.args));
    LaunchConfig c = parsed(row.args);
    EXPECT_EQ(c.topology.multi_node, row.multi_node);
    EXPECT_EQ(c.rendezvous.static_rank, row.static_rank);
    EXPECT_EQ(c.rendezvous.agent_worker_store, row.agent_worker_store);
    EXPECT_EQ(c.rendezvous.min_nodes, c.topology.min_nodes);
    EXPECT_EQ(c.rendezvous.max_nodes, c.topology.max_nodes);
    EXPECT_EQ(c.rendezvous.run_id, c.rdzv_id);
  }
  LaunchConfig c = parsed({"--nnodes", "2:3", "--rdzv-id", "job", "--max-restarts", "4", "--nproc-per-node", "5",
                           "--rdzv-backend", "c10d", "--rdzv-endpoint", "h"});
  EXPECT_EQ(c.topology.min_nodes, 2);
  EXPECT_EQ(c.topology.max_nodes, 3);
  EXPECT_EQ(c.topology.nproc_per_node, 5);
  EXPECT_EQ(c.rendezvous.run_id, "job");
  EXPECT_EQ(c.rendezvous.max_restarts, 4);
  EXPECT_FALSE(c.rendezvous.is_static);
}

TEST(CliResolution, DevicesOfEachLocalRank) {
  using Devices = std::vector<std::optional<std::string>>;
  struct Row {
    Args args;
    Devices devices;
  };
  const Row rows[] = {
      {{}, {std::nullopt}},
      {{"--nproc-per-node", "3"}, {std::nullopt, std::nullopt, std::nullopt}},
      {{"--nproc-per-node", "2", "--devices-per-worker", "2"}, {"0,1", "2,3"}},
      {{"--nproc-per-node", "4", "--devices-per-worker", "1"}, {"0", "1", "2", "3"}},
      {{"--nproc-per-node", "gpu", "--devices-per-worker", "2"}, {"0,1", "2,3"}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(joined(row.args));
    LaunchConfig c = parsed(row.args, kNoPath, kGpuHost);
    EXPECT_EQ(c.devices, row.devices);
    EXPECT_FALSE(c.device_source);  // no driver was asked
  }
  // The drivers' answer, asked once and only when it matters: its names and where they came from.
  int asked = 0;
  HostFacts host(8, 0);
  host.count_devices = [&asked] {
    ++asked;
    return VisibleDevices{{"GPU-a", "GPU-b", "GPU-c"}, "NVML: 3 GPUs"};
  };
  LaunchConfig c = parsed({"--nproc-per-node", "gpu", "--devices-per-worker", "1"}, kNoPath, host);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(c.devices, (Devices{"GPU-a", "GPU-b", "GPU-c"}));
  EXPECT_EQ(c.device_source, "NVML: 3 GPUs");
  LaunchConfig plain = parsed({"--nproc-per-node", "2"}, kNoPath, host);
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(plain.device_source);
  std::string message = refusal({"--nproc-per-node", "4", "--devices-per-worker", "1"}, kNoPath, host);
  EXPECT_EQ(message.rfind("--devices-per-worker", 0), 0U) << message;
}

TEST(CliResolution, StoreTokenIsReadBeforeAnythingRuns) {
  testing_support::ScratchFolder folder("cli_token");
  folder.write("token", "s3cret\n", 0600);
  folder.write("empty", "", 0600);
  const std::string file = (folder.root() / "token").string();
  struct Row {
    Environ env;
    std::optional<std::string> token;
    std::string message;  ///< non-empty: refused with it
  };
  const Row rows[] = {
      {{}, std::nullopt, ""},
      {{{"DDPRUN_STORE_TOKEN", "abc"}}, "abc", ""},
      {{{"DDPRUN_STORE_TOKEN_FILE", file}}, "s3cret", ""},
      {{{"DDPRUN_STORE_TOKEN", ""}}, std::nullopt, "DDPRUN_STORE_TOKEN is set but empty"},
      {{{"DDPRUN_STORE_TOKEN", "a"}, {"DDPRUN_STORE_TOKEN_FILE", file}},
       std::nullopt,
       "both DDPRUN_STORE_TOKEN and DDPRUN_STORE_TOKEN_FILE are set: set only one"},
      {{{"DDPRUN_STORE_TOKEN_FILE", (folder.root() / "empty").string()}},
       std::nullopt,
       "the store token file " + (folder.root() / "empty").string() + " (DDPRUN_STORE_TOKEN_FILE) is empty"},
  };
  for (const auto& row : rows) {
    Environ env = kNoPath;
    env.insert(row.env.begin(), row.env.end());
    if (row.message.empty()) {
      EXPECT_EQ(parsed({}, env).store_token, row.token);
    } else {
      EXPECT_EQ(refusal({}, env), row.message);
    }
  }
}

TEST(OptionHandles, EveryHandleNamesItsOwnTableEntry) {
  std::size_t count = 0;
  for (const auto& spec : option_table()) {
    EXPECT_EQ(&spec_of(spec.id), &spec) << spec.name;
    EXPECT_EQ(find_long(spec.name), &spec) << spec.name;
    ++count;
  }
  EXPECT_EQ(count, static_cast<std::size_t>(Option::count_));
  EXPECT_EQ(spec_of(Option::rdzv_conf).name, "rdzv-conf");
  EXPECT_EQ(spec_of(Option::stdin_target).name, "stdin");
}

}  // namespace
}  // namespace ddprun::launcher

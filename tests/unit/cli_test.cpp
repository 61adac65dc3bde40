// parse_command_line: flags, PET_* fallback, validation, and how PROGRAM is run.
#include "launcher/cli/cli.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <regex>

#include "cli_parse.hpp"
#include "launcher/cli/cli_values.hpp"
#include "launcher/base/errors.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

struct Malformed {
  Args args;
  std::string flag;  ///< what the message must start with
  HostFacts host = kCpuHost;
};

TEST(ParseCommandLine, MalformedCommandLinesAreOneLineUsageErrorsNamingTheFlag) {
  const std::vector<Malformed> cases{
      {{"--nnodes", "3:1", "t.py"}, "--nnodes"},
      {{"--nnodes", "0", "t.py"}, "--nnodes"},
      {{"--nnodes", "1:2:3", "t.py"}, "--nnodes"},
      {{"--nnodes", "two", "t.py"}, "--nnodes"},
      {{"--nnodes", "1.5", "t.py"}, "--nnodes"},
      {{"--nnodes", "99999999999", "t.py"}, "--nnodes"},
      {{"--nnodes", "1\n2", "t.py"}, "--nnodes"},
      {{"--nproc-per-node", "0", "t.py"}, "--nproc-per-node"},
      {{"--nproc-per-node", "-2", "t.py"}, "--nproc-per-node"},
      {{"--nproc-per-node", "many", "t.py"}, "--nproc-per-node"},
      {{"--nproc-per-node", "gpu", "t.py"}, "--nproc-per-node"},
      {{"--node-rank", "-1", "t.py"}, "--node-rank"},
      {{"--nnodes", "2", "--node-rank", "2", "t.py"}, "--node-rank"},
      {{"--master-port", "65536", "t.py"}, "--master-port"},
      {{"--master-port", "http", "t.py"}, "--master-port"},
      {{"--master-addr", "", "t.py"}, "--master-addr"},
      {{"--max-restarts", "-1", "t.py"}, "--max-restarts"},
      {{"--monitor-interval", "0", "t.py"}, "--monitor-interval"},
      {{"--monitor-interval", "nan", "t.py"}, "--monitor-interval"},
      {{"--shutdown-timeout", "-5", "t.py"}, "--shutdown-timeout"},
      {{"--rdzv-backend", "etcd", "t.py"}, "--rdzv-backend"},
      {{"--rdzv-endpoint", "host:port", "t.py"}, "--rdzv-endpoint"},
      {{"--rdzv-endpoint", "host:70000", "t.py"}, "--rdzv-endpoint"},
      {{"--rdzv-endpoint", "[::1:29400", "t.py"}, "--rdzv-endpoint"},
      {{"--rdzv-endpoint", "fe80::1", "t.py"}, "--rdzv-endpoint"},  // torchrun: host "fe80:", port 1
      {{"--rdzv-endpoint", "::1", "t.py"}, "--rdzv-endpoint"},
      {{"--rdzv-endpoint", "bad host:1", "t.py"}, "--rdzv-endpoint"},
      {{"--rdzv-id", "../../etc", "t.py"}, "--rdzv-id"},
      {{"--rdzv-id", "a/b", "t.py"}, "--rdzv-id"},
      {{"--rdzv-id", "..", "t.py"}, "--rdzv-id"},
      {{"--rdzv-conf", "join_timeout", "t.py"}, "--rdzv-conf"},
      {{"--rdzv-conf", "=5", "t.py"}, "--rdzv-conf"},
      {{"--rdzv-conf", "a=1,", "t.py"}, "--rdzv-conf"},
      {{"--rdzv-conf", "join_timeout=-1", "t.py"}, "--rdzv-conf"},
      {{"--rdzv-conf", "read_timeout=soon", "t.py"}, "--rdzv-conf"},
      {{"--rdzv-conf", "is_host=maybe", "t.py"}, "--rdzv-conf"},
      {{"-r", "4", "t.py"}, "--redirects"},
      {{"--redirects", "0:1,x", "t.py"}, "--redirects"},
      {{"-t", "0:1,0:2", "t.py"}, "--tee"},
      {{"--tee", "a:1", "t.py"}, "--tee"},
      {{"--tee", "-1:1", "t.py"}, "--tee"},
      {{"--local-ranks-filter", "0,x", "t.py"}, "--local-ranks-filter"},
      {{"--nproc-per-node", "2", "--local-ranks-filter", "2", "t.py"}, "--local-ranks-filter"},
      {{"--signals-to-handle", "SIGFOO", "t.py"}, "--signals-to-handle"},
      {{"--signals-to-handle", "SIGTERM,SIGKILL", "t.py"}, "--signals-to-handle"},
      {{"--signals-to-handle", "SIGSTOP", "t.py"}, "--signals-to-handle"},
      {{"--signals-to-handle", "SIGTERM,SIGCHLD", "t.py"}, "--signals-to-handle"},
      {{"--devices-per-worker", "-1", "t.py"}, "--devices-per-worker"},
      {{"--devices-per-worker", "1", "--nproc-per-node", "5", "t.py"}, "--devices-per-worker", kGpuHost},
      {{"--devices-per-worker", "8", "--nproc-per-node", "gpu", "t.py"}, "--nproc-per-node", kGpuHost},
      {{"-m", "--no-python", "pkg"}, "--no-python"},
      {{"--run-path", "--no-python", "t.py"}, "--run-path"},
      {{"--log-line-prefix-template", "${rank} ${oops}", "t.py"}, "--log-line-prefix-template"},
      {{"--log-line-prefix-template", "${rank", "t.py"}, "--log-line-prefix-template"},
      {{"--standalone=maybe", "t.py"}, "--standalone"},
      {{"--standalone", "--nnodes", "2", "t.py"}, "--standalone"},
      {{"--foo", "t.py"}, "--foo"},
      {{"--nproc-per-node", "2", "--bar=1", "t.py"}, "--bar=1"},
      {{"-x", "t.py"}, "-x"},
      {{"--nnodes"}, "--nnodes"},
      {{"--nnodes=", "t.py"}, "--nnodes"},
      {{"--master-addr=", "t.py", "a"}, "--master-addr"},
      {{"--master-addr", "--standalone", "t.py"}, "--master-addr"},
      {{"-r", "--tee", "1", "t.py"}, "--redirects"},
      {{"--nproc-per-node", "2"}, "PROGRAM"},
      {{"--"}, "PROGRAM"},
      {{}, "PROGRAM"},
  };
  EXPECT_GE(cases.size(), 25U);
  for (const auto& c : cases) {
    SCOPED_TRACE("ddprun " + joined(c.args));
    std::string message = usage_error(c.args, kNoPath, c.host);
    ASSERT_FALSE(message.empty()) << "no UsageError";
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind(c.flag, 0), 0U) << message;
  }
}

TEST(ParseCommandLine, MessageQuotesTheValueAndSaysWhatIsExpected) {
  EXPECT_EQ(usage_error({"--nnodes", "3:1", "t.py"}), "--nnodes: \"3:1\" is not N or MIN:MAX with 0 < MIN <= MAX");
  EXPECT_EQ(usage_error({"--nnodes", "1\n2", "t.py"}), "--nnodes: \"1\\n2\" is not N or MIN:MAX with 0 < MIN <= MAX");
}

TEST(ParseCommandLine, Defaults) {
  LaunchConfig c = parse({"t.py"});
  LaunchConfig d;
  EXPECT_EQ(c.topology.min_nodes, 1);
  EXPECT_EQ(c.topology.max_nodes, 1);
  EXPECT_EQ(c.topology.nproc_per_node, 1);
  EXPECT_EQ(c.topology.node_rank, 0);
  EXPECT_EQ(c.master_addr, "127.0.0.1");
  EXPECT_EQ(c.master_port, 29500);
  EXPECT_EQ(c.rdzv_backend, RdzvBackend::static_);
  EXPECT_FALSE(c.rdzv_endpoint);
  EXPECT_EQ(c.rdzv_id, "none");
  EXPECT_TRUE(c.rdzv_conf.given.empty());
  EXPECT_FALSE(c.standalone);
  EXPECT_EQ(c.max_restarts, 0);
  EXPECT_DOUBLE_EQ(c.monitor_interval_s, 0.1);
  EXPECT_DOUBLE_EQ(c.shutdown_timeout_s, 30.0);
  EXPECT_EQ(c.signals_to_handle, d.signals_to_handle);
  EXPECT_EQ(c.role, "default");
  EXPECT_EQ(c.devices_per_worker, 0);
  EXPECT_EQ(c.log_dir, "");
  EXPECT_EQ(c.redirects.all, StdStreams::none);
  EXPECT_FALSE(c.local_ranks_filter);
  EXPECT_EQ(c.log_line_prefix_template, "");
  EXPECT_EQ(c.mode, ProgramMode::python_script);
  EXPECT_EQ(c.program, "t.py");
  EXPECT_TRUE(c.program_args.empty());
}

TEST(ParseCommandLine, ArgumentsAfterProgramAreKeptVerbatim) {
  LaunchConfig c = parse({"--nproc-per-node", "2", "train.py", "--lr", "0.1", "-m", "x", "--nnodes", "5", "--",
                          "${local_rank}", "--help", "--nproc_per_node=9"});
  EXPECT_EQ(c.topology.nproc_per_node, 2);
  EXPECT_EQ(c.topology.min_nodes, 1);
  EXPECT_EQ(c.mode, ProgramMode::python_script);
  EXPECT_EQ(c.program, "train.py");
  EXPECT_EQ(c.program_args,
            (Args{"--lr", "0.1", "-m", "x", "--nnodes", "5", "--", "${local_rank}", "--help", "--nproc_per_node=9"}));
}

TEST(ParseCommandLine, DoubleDashEndsOptions) {
  LaunchConfig c = parse({"--nnodes", "1", "--", "t.py", "--", "-x"});
  EXPECT_EQ(c.program, "t.py");
  EXPECT_EQ(c.program_args, (Args{"--", "-x"}));
}

TEST(ParseCommandLine, BothSpellingsAndTheEqualsForm) {
  struct Spelling {
    Args args;
    int nproc;
  };
  for (const Spelling& s : std::vector<Spelling>{{{"--nproc-per-node", "3", "t.py"}, 3},
                                                 {{"--nproc_per_node", "3", "t.py"}, 3},
                                                 {{"--nproc-per-node=4", "t.py"}, 4},
                                                 {{"--nproc_per_node=4", "t.py"}, 4},
                                                 {{"--nproc_per_node", "2", "--nproc-per-node=5", "t.py"}, 5}}) {
    SCOPED_TRACE(joined(s.args));
    EXPECT_EQ(parse(s.args).topology.nproc_per_node, s.nproc);
  }
  // Every multi-word option, underscored.
  LaunchConfig c = parse({"--node_rank=1", "--nnodes=2", "--master_addr", "10.0.0.1", "--master_port", "1234",
                          "--rdzv_backend", "c10d", "--rdzv_endpoint", "h:1", "--rdzv_id", "job", "--rdzv_conf",
                          "timeout=5", "--max_restarts", "3", "--monitor_interval", "2", "--local_addr", "me",
                          "--log_dir", "/l", "--local_ranks_filter", "0", "--shutdown_timeout", "7",
                          "--signals_to_handle", "SIGUSR1", "--devices_per_worker", "1",
                          "--log_line_prefix_template", "${rank}:", "--run_path", "/bin/sh"},
                         kNoPath, kGpuHost);
  EXPECT_EQ(c.topology.node_rank, 1);
  EXPECT_EQ(c.master_addr, "10.0.0.1");
  EXPECT_EQ(c.master_port, 1234);
  EXPECT_EQ(c.rdzv_backend, RdzvBackend::c10d);
  EXPECT_EQ(endpoint_text(c), "h:1");
  EXPECT_EQ(c.rdzv_id, "job");
  EXPECT_EQ(c.rdzv_conf.given.at("timeout"), "5");
  EXPECT_EQ(c.max_restarts, 3);
  EXPECT_DOUBLE_EQ(c.monitor_interval_s, 2.0);
  EXPECT_EQ(c.local_addr, "me");
  EXPECT_EQ(c.log_dir, "/l");
  EXPECT_EQ(c.local_ranks_filter, std::set<int>{0});
  EXPECT_DOUBLE_EQ(c.shutdown_timeout_s, 7.0);
  EXPECT_EQ(c.signals_to_handle, std::vector<int>{SIGUSR1});
  EXPECT_EQ(c.devices_per_worker, 1);
  EXPECT_EQ(c.log_line_prefix_template, "${rank}:");
  EXPECT_EQ(c.mode, ProgramMode::python_script);  // --run_path: /bin/sh is run with python
  EXPECT_EQ(parse({"--no_python", "t.py"}).mode, ProgramMode::executable);
}

TEST(ParseCommandLine, ShortOptions) {
  LaunchConfig c = parse({"-r", "3", "-t2", "-m", "pkg.main"});
  EXPECT_EQ(c.redirects.all, StdStreams::both);
  EXPECT_EQ(c.tee.all, StdStreams::err);
  EXPECT_EQ(c.mode, ProgramMode::python_module);
  EXPECT_EQ(c.program, "pkg.main");
  LaunchConfig clustered = parse({"-mr", "1", "pkg"});
  EXPECT_EQ(clustered.mode, ProgramMode::python_module);
  EXPECT_EQ(clustered.redirects.all, StdStreams::out);
}

TEST(ParseCommandLine, StreamMaps) {
  LaunchConfig c = parse({"--nproc-per-node", "4", "-r", "0:1,3:2", "--tee=1:3", "t.py"});
  EXPECT_EQ(c.redirects.per_local_rank, (std::map<int, StdStreams>{{0, StdStreams::out}, {3, StdStreams::err}}));
  EXPECT_EQ(c.redirects.for_local_rank(1), StdStreams::none);
  EXPECT_EQ(c.tee.for_local_rank(1), StdStreams::both);
  EXPECT_EQ(parse({"-r", "12:0", "t.py"}).redirects.per_local_rank.count(12), 1U);  // beyond nproc: harmless
}

TEST(ParseCommandLine, PrecedenceCommandLineThenPetThenDefault) {
  Environ env = kNoPath;
  EXPECT_EQ(parse({"t.py"}, env).topology.nproc_per_node, 1);
  env["PET_NPROC_PER_NODE"] = "3";
  EXPECT_EQ(parse({"t.py"}, env).topology.nproc_per_node, 3);
  EXPECT_EQ(parse({"--nproc-per-node", "2", "t.py"}, env).topology.nproc_per_node, 2);
  env["PET_NPROC_PER_NODE"] = "";  // empty counts as unset
  EXPECT_EQ(parse({"t.py"}, env).topology.nproc_per_node, 1);
}

TEST(ParseCommandLine, EveryOptionReadsItsPetVariable) {
  Environ env = kNoPath;
  env.insert({{"PET_NPROC_PER_NODE", "2"},   {"PET_NNODES", "1:3"},
              {"PET_NODE_RANK", "2"},        {"PET_MASTER_ADDR", "node0"},
              {"PET_MASTER_PORT", "4000"},   {"PET_RDZV_ENDPOINT", "[::1]:5000"},
              {"PET_RDZV_BACKEND", "c10d"},  {"PET_RDZV_ID", "job7"},
              {"PET_RDZV_CONF", "join_timeout=60"}, {"PET_MAX_RESTARTS", "4"},
              {"PET_MONITOR_INTERVAL", "1.5"}, {"PET_ROLE", "trainer"},
              {"PET_RUN_PATH", "0"},        {"PET_LOG_DIR", "/logs"},
              {"PET_REDIRECTS", "3"},        {"PET_TEE", "0:1"},
              {"PET_LOCAL_RANKS_FILTER", "1"}, {"PET_LOCAL_ADDR", "10.1.1.1"},
              {"PET_SHUTDOWN_TIMEOUT", "0"}, {"PET_SIGNALS_TO_HANDLE", "TERM,USR2"},
              {"PET_DEVICES_PER_WORKER", "2"}, {"PET_LOG_LINE_PREFIX_TEMPLATE", "${hostname}|"},
              {"PET_MODULE", "1"}});
  LaunchConfig c = parse({"pkg.main"}, env, kGpuHost);
  EXPECT_EQ(c.topology.nproc_per_node, 2);
  EXPECT_EQ(c.topology.min_nodes, 1);
  EXPECT_EQ(c.topology.max_nodes, 3);
  EXPECT_EQ(c.topology.node_rank, 2);
  EXPECT_EQ(c.master_addr, "node0");
  EXPECT_EQ(c.master_port, 4000);
  EXPECT_EQ(endpoint_text(c), "[::1]:5000");
  EXPECT_EQ(c.rdzv_backend, RdzvBackend::c10d);
  EXPECT_EQ(c.rdzv_id, "job7");
  EXPECT_EQ(c.rdzv_conf.given, (std::map<std::string, std::string>{{"join_timeout", "60"}}));
  EXPECT_EQ(c.max_restarts, 4);
  EXPECT_DOUBLE_EQ(c.monitor_interval_s, 1.5);
  EXPECT_EQ(c.role, "trainer");
  EXPECT_EQ(c.log_dir, "/logs");
  EXPECT_EQ(c.redirects.all, StdStreams::both);
  EXPECT_EQ(c.tee.for_local_rank(0), StdStreams::out);
  EXPECT_EQ(c.local_ranks_filter, std::set<int>{1});
  EXPECT_EQ(c.local_addr, "10.1.1.1");
  EXPECT_DOUBLE_EQ(c.shutdown_timeout_s, 0.0);
  EXPECT_EQ(c.signals_to_handle, (std::vector<int>{SIGTERM, SIGUSR2}));
  EXPECT_EQ(c.devices_per_worker, 2);
  EXPECT_EQ(c.log_line_prefix_template, "${hostname}|");
  EXPECT_EQ(c.mode, ProgramMode::python_module);

  Environ standalone = kNoPath;
  standalone["PET_STANDALONE"] = "True";
  EXPECT_TRUE(parse({"t.py"}, standalone).standalone);
  Environ no_python = kNoPath;
  no_python["PET_NO_PYTHON"] = "true";
  EXPECT_EQ(parse({"t.py"}, no_python).mode, ProgramMode::executable);
}

TEST(ParseCommandLine, PetBooleans) {
  for (const char* yes : {"1", "true", "True", "TRUE"}) {
    EXPECT_TRUE(parse({"t.py"}, {{"PET_STANDALONE", yes}}).standalone) << yes;
  }
  for (const char* no : {"0", "false", "False"}) {
    EXPECT_FALSE(parse({"t.py"}, {{"PET_STANDALONE", no}}).standalone) << no;
  }
  std::string message = usage_error({"t.py"}, {{"PET_STANDALONE", "yes"}});
  EXPECT_EQ(message.rfind("--standalone (from PET_STANDALONE)", 0), 0U) << message;
}

TEST(ParseCommandLine, BadPetValueNamesTheVariable) {
  std::string message = usage_error({"t.py"}, {{"PET_NNODES", "3:1"}});
  EXPECT_EQ(message, "--nnodes (from PET_NNODES): \"3:1\" is not N or MIN:MAX with 0 < MIN <= MAX");
  message = usage_error({"t.py"}, {{"PET_MASTER_PORT", "-1"}});
  EXPECT_NE(message.find("PET_MASTER_PORT"), std::string::npos) << message;
  // The command line wins, so a bad PET_* value under a good flag is never read.
  EXPECT_EQ(parse({"--nnodes", "2", "t.py"}, {{"PET_NNODES", "3:1"}}).topology.max_nodes, 2);
}

TEST(ParseCommandLine, Standalone) {
  LaunchConfig a = parse({"--standalone", "--rdzv-backend", "etcd", "--rdzv-endpoint", "x:1", "--rdzv-id", "mine",
                          "t.py"});
  EXPECT_TRUE(a.standalone);
  EXPECT_EQ(a.rdzv_backend, RdzvBackend::c10d);
  EXPECT_EQ(endpoint_text(a), "localhost:0");
  EXPECT_EQ(a.topology.min_nodes, 1);
  EXPECT_EQ(a.topology.max_nodes, 1);
  EXPECT_TRUE(std::regex_match(a.rdzv_id, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << a.rdzv_id;
  EXPECT_NE(parse({"--standalone", "t.py"}).rdzv_id, a.rdzv_id);
  EXPECT_TRUE(parse({"--standalone", "--nnodes=1:1", "t.py"}).standalone);
}

TEST(ParseCommandLine, NprocGpuCpuAuto) {
  EXPECT_EQ(parse({"--nproc-per-node", "gpu", "t.py"}, kNoPath, {16, 4}).topology.nproc_per_node, 4);
  EXPECT_EQ(parse({"--nproc-per-node", "cpu", "t.py"}, kNoPath, {16, 4}).topology.nproc_per_node, 16);
  EXPECT_EQ(parse({"--nproc-per-node", "auto", "t.py"}, kNoPath, {16, 4}).topology.nproc_per_node, 4);
  EXPECT_EQ(parse({"--nproc-per-node", "auto", "t.py"}, kNoPath, {16, 0}).topology.nproc_per_node, 16);
  EXPECT_EQ(parse({"--nproc-per-node", "gpu", "--devices-per-worker", "2", "t.py"}, kNoPath, {16, 5}).topology.nproc_per_node,
            2);
  std::string message = usage_error({"--nproc-per-node", "gpu", "t.py"}, kNoPath, {16, 0});
  EXPECT_NE(message.find("no CUDA devices are visible"), std::string::npos) << message;
}

TEST(ParseCommandLine, DevicesPerWorkerChecksVisibleDevices) {
  EXPECT_EQ(parse({"--nproc-per-node", "2", "--devices-per-worker", "2", "t.py"}, kNoPath, kGpuHost)
                .devices_per_worker,
            2);
  std::string message = usage_error({"--nproc-per-node", "3", "--devices-per-worker", "2", "t.py"}, kNoPath, kGpuHost);
  EXPECT_NE(message.find("needs 6"), std::string::npos) << message;
  EXPECT_NE(message.find("4 visible"), std::string::npos) << message;
}

TEST(ParseCommandLine, MultiNodeIsParsedAndKept) {
  LaunchConfig c = parse({"--nnodes", "2:4", "--node-rank", "3", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                          "head.example:29400", "t.py"});
  EXPECT_EQ(c.topology.min_nodes, 2);
  EXPECT_EQ(c.topology.max_nodes, 4);
  EXPECT_EQ(c.topology.node_rank, 3);
  EXPECT_EQ(c.rdzv_backend, RdzvBackend::c10d);
}

TEST(ParseCommandLine, RdzvConf) {
  LaunchConfig c = parse({"--rdzv-conf", " join_timeout = 5 , is_host=false,store_type=file,timeout=0.5", "t.py"});
  EXPECT_EQ(c.rdzv_conf.given, (std::map<std::string, std::string>{
                             {"join_timeout", "5"}, {"is_host", "false"}, {"store_type", "file"}, {"timeout", "0.5"}}));
  EXPECT_TRUE(parse({"--rdzv-conf", "", "t.py"}).rdzv_conf.given.empty());
}

TEST(ParseCommandLine, SignalsAndFilter) {
  LaunchConfig c = parse({"--nproc-per-node", "4", "--signals-to-handle", "SIGTERM, int,15,SIGUSR1",
                          "--local-ranks-filter", "3,0", "t.py"});
  EXPECT_EQ(c.signals_to_handle, (std::vector<int>{SIGTERM, SIGINT, SIGUSR1}));
  EXPECT_EQ(c.local_ranks_filter, (std::set<int>{0, 3}));
  EXPECT_FALSE(parse({"--local-ranks-filter", "", "t.py"}).local_ranks_filter);
}

TEST(ParseCommandLine, ValueStartingWithDashNeedsEqualsForm) {
  EXPECT_EQ(parse({"--log-line-prefix-template=-${rank}-", "t.py"}).log_line_prefix_template, "-${rank}-");
  EXPECT_EQ(parse({"--rdzv-conf=a=b", "t.py"}).rdzv_conf.given.at("a"), "b");
}

TEST(ParseCommandLine, Mode) {
  EXPECT_EQ(parse({"train.py"}).mode, ProgramMode::python_script);
  EXPECT_EQ(parse({"-m", "pkg.train"}).mode, ProgramMode::python_module);
  EXPECT_EQ(parse({"--module", "pkg.train"}).mode, ProgramMode::python_module);
  EXPECT_EQ(parse({"--no-python", "train.py"}).mode, ProgramMode::executable);
  EXPECT_EQ(parse({"/bin/sh", "-c", "true"}).mode, ProgramMode::executable);
  EXPECT_EQ(parse({"sh"}, {{"PATH", "/nonexistent:/bin:/usr/bin"}}).mode, ProgramMode::executable);
  EXPECT_EQ(parse({"no_such_program_for_ddprun"}).mode, ProgramMode::python_script);
  EXPECT_EQ(parse({"/bin"}).mode, ProgramMode::python_script);  // a folder: python runs its __main__.py
  LaunchConfig run_path = parse({"--run-path", "/bin/sh"});
  EXPECT_EQ(run_path.mode, ProgramMode::python_script);
}

TEST(ParseCommandLine, HelpAndVersion) {
  std::string help = info({"--nproc-per-node", "2", "--help"});
  for (const char* text : {"Membership and rendezvous:", "Workers:", "Output:", "Program:", "--nnodes",
                           "--nproc-per-node", "--node-rank", "--master-addr", "--master-port", "--rdzv-backend",
                           "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf", "--standalone", "--max-restarts",
                           "--monitor-interval", "--role", "-m, --module", "--no-python", "--run-path", "--log-dir",
                           "-r, --redirects", "-t, --tee", "--local-ranks-filter", "--local-addr",
                           "--shutdown-timeout", "--signals-to-handle", "--devices-per-worker",
                           "--log-line-prefix-template", "--version", "PET_"}) {
    EXPECT_NE(help.find(text), std::string::npos) << text;
  }
  ASSERT_FALSE(help.empty());
  EXPECT_EQ(help.back(), '\n');  // main writes it as is
  EXPECT_EQ(info({"-h"}), help);
  std::string version = info({"--version"});
  EXPECT_EQ(version.rfind("ddprun ", 0), 0U) << version;
  // After PROGRAM, --help belongs to the program.
  EXPECT_EQ(info({"t.py", "--help"}), "");
  EXPECT_EQ(parse({"t.py", "--help"}).program_args, Args{"--help"});
}

TEST(ParseEndpoint, Forms) {
  auto e = parse_endpoint("head:1234", 29400);
  EXPECT_EQ(e.host, "head");
  EXPECT_EQ(e.port, 1234);
  e = parse_endpoint("head", 29400);
  EXPECT_EQ(e.port, 29400);
  e = parse_endpoint("[fe80::1%eth0]:80", 29400);
  EXPECT_EQ(e.host, "fe80::1%eth0");
  EXPECT_EQ(e.port, 80);
  e = parse_endpoint("[::1]", 7);
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 7);
  e = parse_endpoint("", 29400);
  EXPECT_EQ(e.host, "localhost");
  EXPECT_EQ(parse_endpoint("localhost:0", 1).port, 0);
  EXPECT_THROW(parse_endpoint("h:", 1), UsageError);
  EXPECT_THROW(parse_endpoint(":5", 1), UsageError);
  EXPECT_THROW(parse_endpoint("[::1]x", 1), UsageError);
  try {
    parse_endpoint("h:-1", 1, "--master");
    FAIL();
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()).rfind("--master: ", 0), 0U) << error.what();
  }
}

TEST(QuoteForMessage, EscapesControlCharacters) {
  EXPECT_EQ(quote_for_message("a b"), "\"a b\"");
  EXPECT_EQ(quote_for_message("a\nb\t\"\\\x01"), "\"a\\nb\\t\\\"\\\\\\x01\"");
}

TEST(ReadHostFacts, CountsCpusAndDevices) {
  HostFacts facts = read_host_facts({{"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_GE(facts.cpu_count, 1);
  EXPECT_EQ(facts.device_count, 0);
}

}  // namespace
}  // namespace ddprun::launcher

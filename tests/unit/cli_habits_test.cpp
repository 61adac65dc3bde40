// torchrun's argument habits (issue 11, item 4), by table: unique prefixes of long options, empty
// values from templates, unbracketed IPv6 endpoints, --start-method, and the legacy
// torch.distributed.launch flags (item 5). Each row says what torchrun-anchor (torch 1.13) does
// with the same command line; tests/compat/args_compat.py checks a sample of them against it.
#include <gtest/gtest.h>

#include "cli_parse.hpp"
#include "launcher/cli/cli.hpp"
#include "launcher/cli/cli_spelling.hpp"
#include "launcher/cli/cli_values.hpp"
#include "launcher/base/errors.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

TEST(MatchLongName, ExactWinsUniquePrefixMatchesAmbiguousNamesAll) {
  const std::vector<LongName> names{{"foo", 0}, {"foobar", 1}, {"foo_baz", 2}, {"foo-baz", 2}, {"qux", 3}};
  struct Row {
    std::string typed;
    NameMatch::Kind kind;
    std::size_t owner;
    std::vector<std::string> candidates;
  };
  const std::vector<Row> rows{
      {"foo", NameMatch::Kind::unique, 0, {}},  // exact, although a prefix of three others
      {"foob", NameMatch::Kind::unique, 1, {}},
      {"foo_", NameMatch::Kind::unique, 2, {}},
      {"foo-b", NameMatch::Kind::unique, 2, {}},
      {"q", NameMatch::Kind::unique, 3, {}},
      {"fo", NameMatch::Kind::ambiguous, 0, {"--foo", "--foobar", "--foo_baz"}},  // each option once
      {"x", NameMatch::Kind::none, 0, {}},
      {"", NameMatch::Kind::none, 0, {}},
      {"foobarx", NameMatch::Kind::none, 0, {}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.typed);
    NameMatch m = match_long_name(row.typed, names);
    EXPECT_EQ(m.kind, row.kind);
    if (row.kind == NameMatch::Kind::unique) {
      EXPECT_EQ(m.owner, row.owner);
    }
    EXPECT_EQ(m.candidates, row.candidates);
  }
}

TEST(SpellOutOptions, FullNamesBeforeProgramOnly) {
  struct Row {
    Args in, out;
  };
  const std::vector<Row> rows{
      {{"--nproc=2", "t.py", "--nproc=3"}, {"--nproc-per-node=2", "t.py", "--nproc=3"}},
      {{"--nnod", "1", "t.py"}, {"--nnodes", "1", "t.py"}},
      {{"--nproc_per", "2", "t.py"}, {"--nproc-per-node", "2", "t.py"}},
      {{"--stand", "t.py"}, {"--standalone", "t.py"}},
      {{"--log_dir=", "t.py"}, {"--log-dir", "", "t.py"}},
      {{"--rdzv_conf=", "--nproc", "2", "t.py"}, {"--rdzv-conf", "", "--nproc-per-node", "2", "t.py"}},
      {{"-m", "pkg"}, {"-m", "pkg"}},
      {{"-r", "3", "--nproc", "1", "t.py"}, {"-r", "3", "--nproc-per-node", "1", "t.py"}},
      {{"-mr3", "--nproc", "1", "t.py"}, {"-mr3", "--nproc-per-node", "1", "t.py"}},
      {{"--", "--nproc", "t.py"}, {"--", "--nproc", "t.py"}},
      {{"--unknown", "--nproc", "t.py"}, {"--unknown", "--nproc", "t.py"}},
      {{"--h"}, {"--help"}},
      {{"--he"}, {"--help"}},
      {{"--hang-t", "5", "t.py"}, {"--hang-timeout", "5", "t.py"}},
      {{"--vers"}, {"--version"}},
      {{"--verb", "t.py"}, {"--verbose", "t.py"}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(joined(row.in));
    EXPECT_EQ(spell_out_options(row.in), row.out);
  }
}

TEST(TorchrunHabits, UniquePrefixesOfLongOptions) {
  EXPECT_EQ(parse({"--nproc=2", "t.py"}).topology.nproc_per_node, 2);
  EXPECT_EQ(parse({"--nproc_per=3", "t.py"}).topology.nproc_per_node, 3);
  EXPECT_EQ(parse({"--nnod", "1:2", "t.py"}).topology.max_nodes, 2);
  EXPECT_EQ(parse({"--max_r", "4", "t.py"}).max_restarts, 4);
  EXPECT_EQ(parse({"--master_p=1234", "t.py"}).master_port, 1234);
  EXPECT_EQ(endpoint_text(parse({"--rdzv_b", "c10d", "--rdzv_e", "h:1", "--nnodes", "2", "t.py"})), "h:1");
  EXPECT_TRUE(parse({"--stand", "t.py"}).standalone);
  EXPECT_EQ(parse({"--mod", "pkg.x"}).mode, ProgramMode::python_module);
  EXPECT_TRUE(parse({"--use_e", "t.py"}).use_env);
  EXPECT_EQ(parse({"--append-l", "underscore", "t.py"}).append_local_rank, LocalRankArg::underscore);
  // After PROGRAM nothing is ddprun's: a prefix there belongs to the script.
  EXPECT_EQ(parse({"t.py", "--nproc=2"}).program_args, Args{"--nproc=2"});
  EXPECT_NE(info({"--h"}), "");
  // A shortened option is the command line's, so it beats PET_*, which beats the default.
  Environ env = kNoPath;
  env["PET_NPROC_PER_NODE"] = "4";
  EXPECT_EQ(parse({"--nproc=2", "t.py"}, env).topology.nproc_per_node, 2);
  EXPECT_EQ(parse({"t.py"}, env).topology.nproc_per_node, 4);
  env["PET_NPROC_PER_NODE"] = "";  // empty: unset
  EXPECT_EQ(parse({"t.py"}, env).topology.nproc_per_node, 1);
}

TEST(TorchrunHabits, AmbiguousPrefixNamesTheCandidatesLikeArgparse) {
  struct Row {
    Args args;
    std::vector<std::string> must_name;
  };
  const std::vector<Row> rows{
      {{"--no", "t.py"}, {"--no-python", "--node-rank"}},        // torchrun: --no_python, --node_rank
      {{"--rdzv_", "x", "t.py"}, {"--rdzv_backend", "--rdzv_conf"}},  // in the spelling typed
      {{"--m=1", "t.py"}, {"--master-addr", "--master-port", "--max-restarts", "--module"}},
      {{"--ver", "t.py"}, {"--verbose", "--version"}},
      {{"--lo", "t.py"}, {"--log-dir", "--local-addr"}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(joined(row.args));
    std::string message = usage_error(row.args);
    EXPECT_EQ(message.rfind(row.args.front().substr(0, row.args.front().find('=')) + ": ambiguous option: could match ", 0),
              0U)
        << message;
    for (const auto& name : row.must_name) EXPECT_NE(message.find(name), std::string::npos) << message;
  }
  EXPECT_EQ(usage_error({"--no", "t.py"}), "--no: ambiguous option: could match --node-rank, --no-python");
  EXPECT_EQ(usage_error({"--rdzv_", "t.py"}),
            "--rdzv_: ambiguous option: could match --rdzv_backend, --rdzv_endpoint, --rdzv_id, --rdzv_conf");
  EXPECT_TRUE(parse({"--no_", "/bin/sh"}).no_python);  // only --no_python starts with "no_"
}

/// torchrun-anchor (torch 1.13) with `--OPT=` and a script: rc 0 (the default is used) or a refusal.
/// Checked by hand with /work/shared/tools/torchrun-anchor --OPT= p.py, and in part by args_compat.py.
TEST(TorchrunHabits, EmptyValueFromATemplateIsTheDefaultWhereTorchrunAcceptsIt) {
  const LaunchConfig d;
  // Accepted by torchrun: the option's default.
  EXPECT_EQ(parse({"--rdzv_endpoint=", "t.py"}).rdzv_endpoint, d.rdzv_endpoint);
  EXPECT_FALSE(parse({"--rdzv_endpoint", " ", "t.py"}).rdzv_endpoint);  // blank: unset too
  EXPECT_TRUE(parse({"--rdzv_conf=", "t.py"}).rdzv_conf.given.empty());
  EXPECT_EQ(parse({"--log_dir=", "t.py"}).log_dir, "");
  EXPECT_EQ(parse({"--role=", "t.py"}).role, "default");  // torchrun: ROLE_NAME="" (see differences)
  // torchrun makes up a random run id for an empty one: str(uuid4().int).
  std::string id = parse({"--rdzv_id=", "t.py"}).rdzv_id;
  EXPECT_GE(id.size(), 30U) << id;
  EXPECT_EQ(id.find_first_not_of("0123456789"), std::string::npos) << id;
  EXPECT_NE(id, parse({"--rdzv_id=", "t.py"}).rdzv_id);
  // torch 2.x options, where an empty value is falsy there too.
  EXPECT_EQ(parse({"--local_addr=", "t.py"}).local_addr, "");
  EXPECT_FALSE(parse({"--local_ranks_filter=", "t.py"}).local_ranks_filter);
  EXPECT_EQ(parse({"--log_line_prefix_template=", "t.py"}).log_line_prefix_template, "");
  // The separate form is the same value to argparse: `--log_dir "$UNSET"`.
  EXPECT_EQ(parse({"--log_dir", "", "t.py"}).log_dir, "");
  // The empty value is the command line's: it beats PET_* as any command-line value does.
  Environ env = kNoPath;
  env["PET_LOG_DIR"] = "/from/env";
  env["PET_RDZV_CONF"] = "join_timeout=5";
  LaunchConfig c = parse({"--log_dir=", "--rdzv_conf=", "t.py"}, env);
  EXPECT_EQ(c.log_dir, "");
  EXPECT_TRUE(c.rdzv_conf.given.empty());
  EXPECT_EQ(parse({"t.py"}, env).log_dir, "/from/env");
  // The next argument is not taken as the value (CLI11's reading of `--opt=`).
  LaunchConfig e = parse({"--log_dir=", "--nproc=2", "t.py"});
  EXPECT_EQ(e.topology.nproc_per_node, 2);
  EXPECT_EQ(e.program, "t.py");
}

TEST(TorchrunHabits, EmptyValueIsRefusedWhereTorchrunRefusesIt) {
  // torchrun-anchor: ValueError (rc 1) or argparse's error (rc 2) for each.
  for (const char* option : {"--nnodes", "--nproc_per_node", "--rdzv_backend", "--max_restarts",
                             "--monitor_interval", "--start_method", "--redirects", "--tee", "--node_rank",
                             "--master_addr", "--master_port"}) {
    std::string dashed = option;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    dashed[0] = dashed[1] = '-';
    SCOPED_TRACE(option);
    std::string message = usage_error({std::string(option) + "=", "t.py"});
    EXPECT_EQ(message.rfind(dashed, 0), 0U) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  // ddprun's own options have no template habit to honour.
  for (const char* option : {"--pty", "--stdin", "--append-local-rank", "--worker-store", "--shutdown-timeout",
                             "--devices-per-worker", "--signals-to-handle", "--forward-signals"}) {
    SCOPED_TRACE(option);
    EXPECT_EQ(usage_error({std::string(option) + "=", "t.py"}).rfind(option, 0), 0U);
  }
}

TEST(TorchrunHabits, UnbracketedIpv6EndpointSplitsAtTheLastColon) {
  struct Row {
    std::string text;
    std::string canonical;  ///< what the rendezvous layer is given, port included; "" = refused
  };
  const std::vector<Row> rows{
      {"::1:29400", "[::1]:29400"},
      {"fe80::1:2:29401", "[fe80::1:2]:29401"},
      {"[::1]:29400", "[::1]:29400"},
      {"[::1]", "[::1]:29400"},
      {"head:1", "head:1"},
      {" head ", "head:29400"},
      {"::1", ""},      // torchrun: host ":" port 1
      {"fe80::1", ""},  // torchrun: host "fe80:" port 1
      {"a:b:1", ""},
      {"::1:70000", ""},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.text);
    Args args{"--rdzv-backend", "c10d", "--nnodes", "2", "--rdzv-endpoint", row.text, "t.py"};
    if (row.canonical.empty()) {
      EXPECT_EQ(usage_error(args).rfind("--rdzv-endpoint: ", 0), 0U) << usage_error(args);
    } else {
      EXPECT_EQ(endpoint_text(parse(args)), row.canonical);
    }
  }
  rendezvous::Endpoint e = parse_endpoint("::1:29400", 1);
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 29400);
}

TEST(TorchrunHabits, StartMethodIsAcceptedAndChangesNothing) {
  for (const char* spelling : {"--start-method", "--start_method", "--start_m"}) {
    for (const char* method : {"fork", "spawn", "forkserver"}) {
      LaunchConfig c = parse({spelling, method, "t.py", "x"});
      EXPECT_EQ(c.start_method, method);
      EXPECT_EQ(c.program_args, Args{"x"});
      EXPECT_EQ(c.mode, ProgramMode::python_script);
    }
  }
  EXPECT_EQ(usage_error({"--start_method=thread", "t.py"}).rfind("--start-method", 0), 0U);
}

TEST(LegacyLaunch, UseEnvAndAppendLocalRank) {
  EXPECT_TRUE(parse({"--use_env", "t.py"}).use_env);
  EXPECT_TRUE(parse({"--use-env", "t.py"}).use_env);
  EXPECT_FALSE(parse({"t.py"}).use_env);
  EXPECT_EQ(parse({"--append-local-rank=dash", "t.py"}).append_local_rank, LocalRankArg::dash);
  EXPECT_EQ(parse({"--append_local_rank", "underscore", "t.py"}).append_local_rank, LocalRankArg::underscore);
  EXPECT_EQ(parse({"t.py"}).append_local_rank, LocalRankArg::off);
  Environ env = kNoPath;
  env["PET_APPEND_LOCAL_RANK"] = "underscore";
  EXPECT_EQ(parse({"t.py"}, env).append_local_rank, LocalRankArg::underscore);
  // --use_env is what turned torch.distributed.launch's --local_rank off: both is a contradiction.
  std::string message = usage_error({"--use-env", "--append-local-rank", "dash", "t.py"});
  EXPECT_EQ(message.rfind("--append-local-rank: ", 0), 0U) << message;
  EXPECT_NE(message.find("--use-env"), std::string::npos) << message;
  // ddprun takes no --local-rank of its own (nothing launches ddprun with one). By argparse's
  // prefix rule `--local_rank` is --local_ranks_filter, as for torch 2.x's torchrun.
  EXPECT_EQ(parse({"--local_rank=0", "t.py"}).local_ranks_filter, (std::set<int>{0}));
  EXPECT_EQ(usage_error({"--local-rank-x=0", "t.py"}).rfind("--local-rank-x=0", 0), 0U);
}

}  // namespace
}  // namespace ddprun::launcher

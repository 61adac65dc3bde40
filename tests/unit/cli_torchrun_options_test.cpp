// Every option of torchrun 2.11 (its argparse options, recorded on a real machine:
// data/pytorch-2.11/torchrun-options.json, a copy of ../shared/reference/pytorch-2.11/), in each of
// its spellings, is accepted by ddprun's parser with torchrun's meaning: each choice of a choice
// option, a flag without a value, and a value that the job then holds. A recording with an option
// this table does not know fails the test, so a new torchrun option cannot slip by.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli_parse.hpp"

namespace ddprun::launcher {
namespace {

using namespace cli_testing;

struct Recorded {
  std::vector<std::string> spellings;  ///< "--nproc-per-node", "--nproc_per_node", "-m", ...
  std::string dest;
  std::vector<std::string> choices;  ///< empty: any value
  bool flag = false;                 ///< nargs 0
};

std::vector<Recorded> recorded_options() {
  std::ifstream file(DDPRUN_TORCHRUN_OPTIONS_JSON);
  EXPECT_TRUE(file) << DDPRUN_TORCHRUN_OPTIONS_JSON;
  nlohmann::json document = nlohmann::json::parse(file);
  std::vector<Recorded> options;
  const std::regex quoted("'([^']*)'");
  for (const auto& entry : document.at("options")) {
    Recorded option;
    option.spellings = entry.at("options").get<std::vector<std::string>>();
    option.dest = entry.at("dest").get<std::string>();
    option.flag = entry.at("nargs").get<std::string>() == "0";
    const std::string choices = entry.at("choices").get<std::string>();
    for (std::sregex_iterator it(choices.begin(), choices.end(), quoted), end; it != end; ++it) {
      option.choices.push_back((*it)[1]);
    }
    options.push_back(std::move(option));
  }
  return options;
}

/// How to give one option a value torchrun accepts, and what the job must then hold.
struct Meaning {
  std::string value;                            ///< unused for a flag and a choice option
  Args companions;                              ///< other flags the value needs (c10d needs an endpoint)
  std::function<void(const LaunchConfig&, const std::string&)> check;  ///< the value (or choice) given
  std::string program = "t.py";
};

const std::map<std::string, Meaning>& meanings() {
  static const std::map<std::string, Meaning> table{
      {"nnodes", {"2", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.topology.max_nodes, 2); }}},
      {"nproc_per_node", {"3", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.topology.nproc_per_node, 3); }}},
      {"rdzv_backend", {"c10d", {"--rdzv-endpoint", "node0:1234"},
                        [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.rdzv_backend, RdzvBackend::c10d); }}},
      {"rdzv_endpoint", {"node0:1234", {"--rdzv-backend", "c10d"},
                         [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(endpoint_text(c), "node0:1234"); }}},
      {"rdzv_id", {"job7", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.rdzv_id, "job7"); }}},
      {"rdzv_conf", {"join_timeout=5", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.rdzv_conf.given.at("join_timeout"), "5"); }}},
      {"standalone", {"", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_TRUE(c.standalone); }}},
      {"max_restarts", {"3", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.max_restarts, 3); }}},
      {"monitor_interval", {"0.5", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.monitor_interval_s, 0.5); }}},
      {"start_method", {"", {}, [](const LaunchConfig& c, const std::string& choice) { EXPECT_EQ(c.start_method, choice); }}},
      {"event_log_handler", {"null", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_TRUE(c.notices.empty()); }}},
      {"role", {"trainer", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.role, "trainer"); }}},
      {"module", {"", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.mode, ProgramMode::python_module); }, "pkg.train"}},
      {"no_python", {"", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.mode, ProgramMode::executable); }, "trainer"}},
      {"run_path", {"", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.mode, ProgramMode::python_script); }, "trainer"}},
      {"log_dir", {"/tmp/logs", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.log_dir, "/tmp/logs"); }}},
      {"redirects", {"3", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.redirects.all, StdStreams::both); }}},
      {"tee", {"1", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.tee.all, StdStreams::out); }}},
      {"local_ranks_filter", {"0", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.local_ranks_filter, std::set<int>{0}); }}},
      {"duplicate_stdout_filters", {"loss,acc", {}, [](const LaunchConfig& c, const std::string&) {
         EXPECT_EQ(c.duplicate_stdout_filters, (std::vector<std::string>{"loss", "acc"}));
       }}},
      {"duplicate_stderr_filters", {"Error", {}, [](const LaunchConfig& c, const std::string&) {
         EXPECT_EQ(c.duplicate_stderr_filters, std::vector<std::string>{"Error"});
       }}},
      {"node_rank", {"1", {"--nnodes", "2"}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.topology.node_rank, 1); }}},
      {"master_addr", {"10.0.0.1", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.master_addr, "10.0.0.1"); }}},
      {"master_port", {"1234", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.master_port, 1234); }}},
      {"local_addr", {"10.0.0.2", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_EQ(c.local_addr, "10.0.0.2"); }}},
      {"logs_specs", {"default", {}, [](const LaunchConfig& c, const std::string&) { EXPECT_TRUE(c.notices.empty()); }}},
      {"numa_binding", {"", {}, [](const LaunchConfig& c, const std::string& choice) {
         ASSERT_TRUE(c.numa_binding.has_value());
         EXPECT_EQ(numa_mode_name(*c.numa_binding), choice);
       }}},
      {"signals_to_handle", {"SIGTERM", {}, [](const LaunchConfig& c, const std::string&) {
         EXPECT_EQ(c.signals_to_handle, std::vector<int>{SIGTERM});
       }}},
      {"virtual_local_rank", {"", {}, [](const LaunchConfig& c, const std::string&) {
         EXPECT_TRUE(c.virtual_local_rank);
         EXPECT_EQ(c.devices.at(0), "0");  // CUDA_VISIBLE_DEVICES unset: worker i gets GPU i, as torchrun
       }}},
  };
  return table;
}

TEST(CliTorchrunOptions, TheRecordingIsRead) {
  auto options = recorded_options();
  EXPECT_GE(options.size(), 29U);
}

TEST(CliTorchrunOptions, EverySpellingOfEveryOptionIsAcceptedWithTorchrunsMeaning) {
  for (const auto& option : recorded_options()) {
    auto meaning = meanings().find(option.dest);
    ASSERT_NE(meaning, meanings().end()) << "torchrun 2.11 has " << option.spellings.front()
                                         << ", which this test (and maybe ddprun) does not know";
    const Meaning& m = meaning->second;
    for (const auto& spelling : option.spellings) {
      std::vector<std::string> values = option.choices;
      if (values.empty()) values.push_back(m.value);
      for (const auto& value : values) {
        Args args = m.companions;
        args.push_back(spelling);
        if (!option.flag) args.push_back(value);
        args.push_back(m.program);
        SCOPED_TRACE(joined(args));
        EXPECT_EQ(usage_error(args), "");
        if (!usage_error(args).empty()) continue;
        m.check(parse(args), value);
      }
    }
  }
}

TEST(CliTorchrunOptions, FlagsTakeNoValue) {
  // nargs 0: the argument after the flag is PROGRAM, not the flag's value.
  for (const auto& option : recorded_options()) {
    if (!option.flag) continue;
    const Meaning& m = meanings().at(option.dest);
    for (const auto& spelling : option.spellings) {
      LaunchConfig c = parse({spelling, m.program, "arg"});
      EXPECT_EQ(c.program, m.program) << spelling;
      EXPECT_EQ(c.program_args, Args{"arg"}) << spelling;
    }
  }
}

TEST(CliTorchrunOptions, TheNewOptionsReadTheirPetVariables) {
  Environ env = kNoPath;
  env["PET_NUMA_BINDING"] = "socket";
  env["PET_VIRTUAL_LOCAL_RANK"] = "1";
  env["PET_DUPLICATE_STDOUT_FILTERS"] = "loss";
  env["PET_DUPLICATE_STDERR_FILTERS"] = "Traceback,Error";
  env["PET_EVENT_LOG_HANDLER"] = "null";
  env["PET_LOGS_SPECS"] = "default";
  LaunchConfig c = parse({"t.py"}, env);
  EXPECT_EQ(c.numa_binding, NumaMode::socket);
  EXPECT_TRUE(c.virtual_local_rank);
  EXPECT_EQ(c.duplicate_stdout_filters, std::vector<std::string>{"loss"});
  EXPECT_EQ(c.duplicate_stderr_filters, (std::vector<std::string>{"Traceback", "Error"}));
  EXPECT_TRUE(c.notices.empty());
}

TEST(CliTorchrunOptions, NumaBindingRefusesAnotherMode) {
  EXPECT_EQ(usage_error({"--numa-binding", "cores", "t.py"}),
            "--numa-binding: \"cores\" is not one of node, socket, exclusive, core-complex");
}

TEST(CliTorchrunOptions, PluginsOtherThanTheDefaultsSayWhyTheyDoNothing) {
  LaunchConfig c = parse({"--event-log-handler", "console", "--logs_specs", "mine", "t.py"});
  ASSERT_EQ(c.notices.size(), 2U);
  EXPECT_EQ(c.notices[0], "--event-log-handler=console: no effect under ddprun (it names a handler of torchrun's Python "
                          "event log); ddprun writes the job's events with --events FILE");
  EXPECT_EQ(c.notices[1], "--logs-specs=mine: no effect under ddprun (it names a Python plugin of torchrun's "
                          "torchrun.logs_specs entry points); ddprun's log files: --log-dir, -r, -t");
}

TEST(CliTorchrunOptions, EmptyFilterEntriesAreDropped) {
  // "" is in every line: an empty entry would copy everything.
  EXPECT_EQ(parse({"--duplicate-stdout-filters", "a,,b,", "t.py"}).duplicate_stdout_filters,
            (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(parse({"--duplicate-stdout-filters=", "t.py"}).duplicate_stdout_filters.empty());
}

}  // namespace
}  // namespace ddprun::launcher

// Prometheus text of a job's status: escaping and number spelling by table, and the exposition's
// shape (each family once, HELP and TYPE first, absent values absent, labels as given). A GPU's
// series carry its index and UUID; what NVML did not give has no series (never 0); promtool accepts it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "launcher/observe/metrics_text.hpp"
#include "rank_gpu_sample.hpp"

namespace ddprun::launcher {
namespace {

TEST(MetricsText, LabelValuesAreEscaped) {
  const struct {
    std::string in;
    std::string out;
  } rows[] = {
      {"plain", "plain"},
      {"a\"b", "a\\\"b"},
      {"back\\slash", "back\\\\slash"},
      {"two\nlines", "two\\nlines"},
      {"\\\"\n", "\\\\\\\"\\n"},
      {"caf\xc3\xa9", "caf\xc3\xa9"},  // UTF-8 passes as it is
      {"", ""},
  };
  for (const auto& row : rows) EXPECT_EQ(escape_label_value(row.in), row.out) << row.in;
}

TEST(MetricsText, SampleValuesAsPrometheusReadsThem) {
  const struct {
    double in;
    std::string out;
  } rows[] = {
      {0, "0"},
      {1, "1"},
      {-3, "-3"},
      {0.5, "0.5"},
      {97.25, "97.25"},
      {123456789012.0, "123456789012"},
      {1e300, "1e+300"},
      {std::numeric_limits<double>::infinity(), "+Inf"},
      {-std::numeric_limits<double>::infinity(), "-Inf"},
      {std::nan(""), "NaN"},
  };
  for (const auto& row : rows) EXPECT_EQ(format_sample_value(row.in), row.out) << row.in;
}

JobStatus two_ranks() {
  RankStatus reporting;
  reporting.rank = 0;
  reporting.pid = 100;
  reporting.state = RankState::running;
  reporting.cpu_percent = 150;
  reporting.cpu_seconds = 12.5;
  reporting.rss_bytes = 1 << 20;
  reporting.output_age_seconds = 0.25;
  reporting.progress = ProgressSample{42, 4200, "loss 0.5", 0.5, 10, 1000};
  RankStatus silent;
  silent.rank = 1;
  silent.local_rank = 1;
  silent.pid = 101;
  silent.state = RankState::failed;
  silent.exitcode = -9;
  silent.straggler = true;
  NodeStatus node;
  node.node_rank = 0;
  node.host = "host \"a\"";
  node.restarts = 2;
  node.hangs = 1;
  node.ranks = {reporting, silent};
  node.warm = {WarmInterpreter{0, 900, true}, WarmInterpreter{1, 901, true}, WarmInterpreter{2, 902, false}};
  return JobStatus{"run\\1", 2, {node}};
}

/// name{labels} -> value, and the order in which families were declared.
struct Parsed {
  std::map<std::string, std::string> samples;
  std::vector<std::string> families;
  std::map<std::string, std::string> types;
};

Parsed parse(const std::string& text) {
  Parsed parsed;
  std::istringstream in(text);
  std::string line;
  std::string current;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      current = line.substr(7, line.find(' ', 7) - 7);
      parsed.families.push_back(current);
    } else if (line.rfind("# TYPE ", 0) == 0) {
      auto name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_EQ(name, current) << "TYPE right after its HELP";
      parsed.types[name] = line.substr(line.rfind(' ') + 1);
    } else {
      auto space = line.rfind(' ');
      auto key = line.substr(0, space);
      EXPECT_EQ(key.rfind(current, 0), 0u) << "sample " << key << " under family " << current;
      EXPECT_TRUE(parsed.samples.emplace(key, line.substr(space + 1)).second) << "repeated " << key;
    }
  }
  return parsed;
}

TEST(MetricsText, EveryFamilyOnceWithItsSamples) {
  const std::string text = metrics_text(two_ranks(), EndpointCounters{7, 3, 2});
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const Parsed parsed = parse(text);
  std::set<std::string> unique(parsed.families.begin(), parsed.families.end());
  EXPECT_EQ(unique.size(), parsed.families.size()) << "a family declared twice";

  const std::string r0 = R"(node="0",host="host \"a\"",rank="0",local_rank="0")";
  const std::string r1 = R"(node="0",host="host \"a\"",rank="1",local_rank="1")";
  const std::string n0 = R"(node="0",host="host \"a\"")";
  const struct {
    std::string key;
    std::string value;  ///< empty: the sample must be absent
  } rows[] = {
      {R"(ddprun_job_info{run_id="run\\1"})", "1"},
      {"ddprun_job_world_size", "2"},
      {"ddprun_rank_step{" + r0 + "}", "42"},
      {"ddprun_rank_step{" + r1 + "}", ""},  // never reported: absent, not 0
      {"ddprun_rank_samples{" + r0 + "}", "4200"},
      {"ddprun_rank_samples_per_second{" + r0 + "}", "1000"},
      {"ddprun_rank_samples_per_second{" + r1 + "}", ""},
      {"ddprun_rank_steps_per_second{" + r0 + "}", "10"},
      {"ddprun_rank_progress_age_seconds{" + r0 + "}", "0.5"},
      {"ddprun_rank_cpu_utilization_ratio{" + r0 + "}", "1.5"},
      {"ddprun_rank_cpu_utilization_ratio{" + r1 + "}", "0"},
      {"ddprun_rank_cpu_seconds_total{" + r0 + "}", "12.5"},
      {"ddprun_rank_resident_memory_bytes{" + r0 + "}", "1048576"},
      {"ddprun_rank_output_age_seconds{" + r0 + "}", "0.25"},
      {"ddprun_rank_output_age_seconds{" + r1 + "}", ""},  // no line yet
      {"ddprun_rank_straggler{" + r0 + "}", "0"},
      {"ddprun_rank_straggler{" + r1 + "}", "1"},
      {"ddprun_rank_exit_code{" + r0 + "}", ""},  // still running
      {"ddprun_rank_exit_code{" + r1 + "}", "-9"},
      {"ddprun_rank_state{" + r0 + ",state=\"running\"}", "1"},
      {"ddprun_rank_state{" + r0 + ",state=\"failed\"}", "0"},
      {"ddprun_rank_state{" + r1 + ",state=\"failed\"}", "1"},
      {"ddprun_rank_state{" + r1 + ",state=\"starting\"}", "0"},
      {"ddprun_restarts_total{" + n0 + "}", "2"},
      {"ddprun_hangs_total{" + n0 + "}", "1"},
      {"ddprun_warm_interpreters{" + n0 + ",state=\"ready\"}", "2"},
      {"ddprun_warm_interpreters{" + n0 + ",state=\"importing\"}", "1"},
      {"ddprun_status_requests_total", "7"},
      {"ddprun_status_refused_connections_total", "3"},
      {"ddprun_status_dropped_connections_total", "2"},
  };
  for (const auto& row : rows) {
    auto it = parsed.samples.find(row.key);
    if (row.value.empty()) {
      EXPECT_EQ(it, parsed.samples.end()) << row.key << " should be absent";
    } else {
      ASSERT_NE(it, parsed.samples.end()) << row.key << " missing in\n" << text;
      EXPECT_EQ(it->second, row.value) << row.key;
    }
  }
  for (const auto& [name, type] : parsed.types) {
    EXPECT_EQ(type == "counter", name.ends_with("_total")) << name << " is a " << type;
  }
}

/// two_ranks() with GPUs: rank 0 works on a busy GPU 3 and sees a lost GPU 5; rank 1 sees a
/// GeForce board that tells nothing (NOT_SUPPORTED everywhere) and is a GPU straggler.
JobStatus with_gpus() {
  JobStatus job = two_ranks();
  RankGpu busy = testing::busy_gpu();
  busy.throttle = {"SwPowerCap", "HwThermalSlowdown", "SwPowerCap"};  // a repeat (a peer's) said once
  RankGpu lost;
  lost.index = 5;
  lost.uuid = "GPU-\"odd\"";
  lost.problem = "has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)";
  RankGpu geforce;
  geforce.index = 0;
  auto& ranks = job.nodes[0].ranks;
  ranks[0].gpus = {busy, lost, busy};  // a repeated index (a peer's) is one series
  ranks[1].gpus = {geforce};
  ranks[1].gpu_straggler = true;
  return job;
}

TEST(MetricsText, EachGpuOfEachRankWithItsIndexAndUuid) {
  const std::string text = metrics_text(with_gpus(), EndpointCounters{});
  const Parsed parsed = parse(text);
  const std::string r0 = R"(node="0",host="host \"a\"",rank="0",local_rank="0")";
  const std::string r1 = R"(node="0",host="host \"a\"",rank="1",local_rank="1")";
  const std::string busy = r0 + R"(,gpu="3",uuid="GPU-8932f937-d72c-4106-c12f-20bd9faed9f6")";
  const std::string lost = r0 + R"(,gpu="5",uuid="GPU-\"odd\"")";
  const std::string geforce = r1 + R"(,gpu="0",uuid="")";
  const struct {
    std::string key;
    std::string value;  ///< empty: the sample must be absent
  } rows[] = {
      {"ddprun_rank_gpu_utilization_ratio{" + busy + "}", "0.97"},
      {"ddprun_rank_gpu_memory_used_bytes{" + busy + "}", "65498251264"},
      {"ddprun_rank_gpu_memory_total_bytes{" + busy + "}", "85899345920"},
      {"ddprun_rank_gpu_own_memory_bytes{" + busy + "}", "64424509440"},
      {"ddprun_rank_gpu_temperature_celsius{" + busy + "}", "71"},
      {"ddprun_rank_gpu_power_watts{" + busy + "}", "612.5"},
      {"ddprun_rank_gpu_throttled{" + busy + ",reason=\"SwPowerCap\"}", "1"},
      {"ddprun_rank_gpu_throttled{" + busy + ",reason=\"HwThermalSlowdown\"}", "1"},
      {"ddprun_rank_gpu_throttled{" + busy + ",reason=\"HwSlowdown\"}", ""},  // not active: no series
      {"ddprun_rank_gpu_uncorrectable_ecc_errors{" + busy + "}", "0"},  // known zero: 0
      {"ddprun_rank_gpu_xids_total{" + busy + "}", "2"},
      {"ddprun_rank_gpu_healthy{" + busy + "}", "1"},
      {"ddprun_rank_gpu_healthy{" + lost + "}", "0"},
      {"ddprun_rank_gpu_xids_total{" + lost + "}", "0"},
      {"ddprun_rank_gpu_straggler{" + r0 + "}", "0"},
      {"ddprun_rank_gpu_straggler{" + r1 + "}", "1"},
      // Unknown (NOT_SUPPORTED, NO_PERMISSION, a lost GPU): absent, never 0.
      {"ddprun_rank_gpu_utilization_ratio{" + geforce + "}", ""},
      {"ddprun_rank_gpu_memory_used_bytes{" + geforce + "}", ""},
      {"ddprun_rank_gpu_memory_total_bytes{" + geforce + "}", ""},
      {"ddprun_rank_gpu_own_memory_bytes{" + geforce + "}", ""},
      {"ddprun_rank_gpu_temperature_celsius{" + geforce + "}", ""},
      {"ddprun_rank_gpu_power_watts{" + geforce + "}", ""},
      {"ddprun_rank_gpu_uncorrectable_ecc_errors{" + geforce + "}", ""},
      {"ddprun_rank_gpu_utilization_ratio{" + lost + "}", ""},
      {"ddprun_rank_gpu_temperature_celsius{" + lost + "}", ""},
      {"ddprun_rank_gpu_healthy{" + geforce + "}", "1"},
      {"ddprun_rank_gpu_xids_total{" + geforce + "}", "0"},
  };
  for (const auto& row : rows) {
    auto it = parsed.samples.find(row.key);
    if (row.value.empty()) {
      EXPECT_EQ(it, parsed.samples.end()) << row.key << " should be absent";
    } else {
      ASSERT_NE(it, parsed.samples.end()) << row.key << " missing in\n" << text;
      EXPECT_EQ(it->second, row.value) << row.key;
    }
  }
  // Every GPU series of the busy GPU once: parse() refuses a repeat, and this counts them.
  std::size_t busy_series = 0;
  for (const auto& [key, value] : parsed.samples) busy_series += key.find(busy) != std::string::npos;
  EXPECT_EQ(busy_series, 11u) << "8 values, 2 throttle reasons, 1 health";
  EXPECT_EQ(parsed.types.at("ddprun_rank_gpu_xids_total"), "counter");
  EXPECT_EQ(parsed.types.at("ddprun_rank_gpu_utilization_ratio"), "gauge");
}

TEST(MetricsText, RanksWithoutGpusHaveNoGpuSeries) {
  const std::string text = metrics_text(two_ranks(), EndpointCounters{});
  const Parsed parsed = parse(text);
  for (const auto& [key, value] : parsed.samples) {
    EXPECT_EQ(key.find("_gpu_"), std::string::npos) << key;
  }
  EXPECT_TRUE(parsed.types.count("ddprun_rank_gpu_utilization_ratio")) << "declared all the same";
}

TEST(MetricsText, AJobWithoutNodesStillDeclaresItsFamilies) {
  const Parsed parsed = parse(metrics_text(JobStatus{}, EndpointCounters{}));
  EXPECT_TRUE(parsed.types.count("ddprun_rank_step"));
  EXPECT_TRUE(parsed.samples.count("ddprun_job_world_size"));
}

/// What `promtool check metrics` says of `text` (its exit status and output).
std::pair<int, std::string> promtool_check(const std::string& text) {
  const std::string path = ::testing::TempDir() + "metrics_" + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << text;
  std::string command = "promtool check metrics < '" + path + "' 2>&1";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  int status = ::pclose(pipe);
  std::remove(path.c_str());
  return {WEXITSTATUS(status), output};
}

TEST(MetricsText, PromtoolAcceptsIt) {
  if (::access("/usr/bin/promtool", X_OK) != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian's prometheus package; scripts/setup.sh --tests installs it)";
  }
  for (const JobStatus& job : {two_ranks(), with_gpus()}) {
    auto [status, output] = promtool_check(metrics_text(job, EndpointCounters{7, 3, 2}));
    EXPECT_EQ(status, 0) << output;
    EXPECT_EQ(output, "") << "promtool's lint found something";
  }
  // The check can fail: a counter without _total is refused.
  auto bad = promtool_check("# HELP x_count a\n# TYPE x_count counter\nx_count 1\n");
  EXPECT_NE(bad.first, 0) << bad.second;
}

}  // namespace
}  // namespace ddprun::launcher

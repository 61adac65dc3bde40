#include "launcher/observe/metrics_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <vector>

namespace ddprun::launcher {
namespace {

/// One rank's labels, made once and shared by every family.
std::string rank_labels(const NodeStatus& node, const RankStatus& rank) {
  return "node=\"" + std::to_string(node.node_rank) + "\",host=\"" + escape_label_value(node.host) + "\",rank=\"" +
         std::to_string(rank.rank) + "\",local_rank=\"" + std::to_string(rank.local_rank) + "\"";
}

std::string node_labels(const NodeStatus& node) {
  return "node=\"" + std::to_string(node.node_rank) + "\",host=\"" + escape_label_value(node.host) + "\"";
}

/// HELP text: backslash and newline escaped (a double quote is fine there).
std::string escape_help(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

class Exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    name_ = name;
    text_ += "# HELP " + name_ + " " + escape_help(help) + "\n# TYPE " + name_ + " " + std::string(type) + "\n";
  }
  void sample(const std::string& labels, double value) {
    text_ += name_;
    if (!labels.empty()) text_ += "{" + labels + "}";
    text_ += " " + format_sample_value(value) + "\n";
  }
  std::string take() { return std::move(text_); }

 private:
  std::string name_;
  std::string text_;
};

struct RankRef {
  const NodeStatus* node;
  const RankStatus* rank;
  std::string labels;
};

/// One GPU of one rank, with the rank's labels and its own: NVML's index and the UUID (the name
/// that outlives an index).
struct GpuRef {
  const RankGpu* gpu;
  std::string labels;
};

/// Each rank's GPUs, each index once per rank (a repeated one, from a peer's status, would repeat
/// a series, which a scrape refuses).
std::vector<GpuRef> gpu_refs(const std::vector<RankRef>& ranks) {
  std::vector<GpuRef> gpus;
  for (const auto& ref : ranks) {
    std::set<unsigned int> seen;
    for (const RankGpu& gpu : ref.rank->gpus) {
      if (!seen.insert(gpu.index).second) continue;
      gpus.push_back({&gpu, ref.labels + ",gpu=\"" + std::to_string(gpu.index) + "\",uuid=\"" +
                                escape_label_value(gpu.uuid) + "\""});
    }
  }
  return gpus;
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string metrics_text(const JobStatus& job, const EndpointCounters& counters) {
  std::vector<RankRef> ranks;
  for (const auto& node : job.nodes) {
    for (const auto& rank : node.ranks) ranks.push_back({&node, &rank, rank_labels(node, rank)});
  }
  Exposition out;
  auto per_rank = [&](std::string_view name, std::string_view type, std::string_view help,
                      const std::function<std::optional<double>(const RankStatus&)>& value) {
    out.family(name, type, help);
    for (const auto& ref : ranks) {
      if (auto v = value(*ref.rank)) out.sample(ref.labels, *v);
    }
  };
  auto progress = [](double (*pick)(const ProgressSample&)) {
    return [pick](const RankStatus& rank) -> std::optional<double> {
      if (!rank.progress) return std::nullopt;
      return pick(*rank.progress);
    };
  };

  out.family("ddprun_job_info", "gauge", "The job: always 1, its run id as a label.");
  out.sample("run_id=\"" + escape_label_value(job.run_id) + "\"", 1);
  out.family("ddprun_job_world_size", "gauge", "Workers in the job (WORLD_SIZE).");
  out.sample("", job.world_size);

  per_rank("ddprun_rank_step", "gauge", "The last step the rank reported on its progress channel.",
           progress([](const ProgressSample& p) { return static_cast<double>(p.step); }));
  per_rank("ddprun_rank_samples", "gauge", "Samples the rank reported processed so far.",
           progress([](const ProgressSample& p) { return static_cast<double>(p.samples); }));
  per_rank("ddprun_rank_steps_per_second", "gauge", "The rank's step rate over the monitor's window.",
           progress([](const ProgressSample& p) { return p.steps_per_second; }));
  per_rank("ddprun_rank_samples_per_second", "gauge", "The rank's sample rate over the monitor's window.",
           progress([](const ProgressSample& p) { return p.samples_per_second; }));
  per_rank("ddprun_rank_progress_age_seconds", "gauge", "Seconds since the rank last changed its progress report.",
           progress([](const ProgressSample& p) { return p.age_seconds; }));
  per_rank("ddprun_rank_cpu_utilization_ratio", "gauge",
           "CPU time of the rank's process tree per second since the last sample (1 = one core busy).",
           [](const RankStatus& r) -> std::optional<double> { return r.cpu_percent / 100.0; });
  per_rank("ddprun_rank_cpu_seconds_total", "counter", "User and system CPU seconds of the rank's process tree.",
           [](const RankStatus& r) -> std::optional<double> { return r.cpu_seconds; });
  per_rank("ddprun_rank_resident_memory_bytes", "gauge", "Resident memory of the rank's process tree.",
           [](const RankStatus& r) -> std::optional<double> { return static_cast<double>(r.rss_bytes); });
  per_rank("ddprun_rank_output_age_seconds", "gauge", "Seconds since the rank's last output line (absent: none yet).",
           [](const RankStatus& r) -> std::optional<double> {
             if (r.output_age_seconds < 0) return std::nullopt;
             return r.output_age_seconds;
           });
  per_rank("ddprun_rank_straggler", "gauge", "1 when the rank's step rate is persistently below the others'.",
           [](const RankStatus& r) -> std::optional<double> { return r.straggler ? 1 : 0; });
  per_rank("ddprun_rank_exit_code", "gauge", "The rank's exit code once it ended (-N: signal N).",
           [](const RankStatus& r) -> std::optional<double> {
             if (r.state == RankState::starting || r.state == RankState::running) return std::nullopt;
             return r.exitcode;
           });

  // The GPUs each rank sees (NVML's values): a value NVML did not give has no sample, never 0.
  const std::vector<GpuRef> gpus = gpu_refs(ranks);
  auto per_gpu = [&](std::string_view name, std::string_view type, std::string_view help,
                     const std::function<std::optional<double>(const RankGpu&)>& value) {
    out.family(name, type, help);
    for (const auto& ref : gpus) {
      if (auto v = value(*ref.gpu)) out.sample(ref.labels, *v);
    }
  };
  auto known = [](auto pick) {
    return [pick](const RankGpu& gpu) -> std::optional<double> {
      const auto& value = pick(gpu);
      if (!value) return std::nullopt;
      return static_cast<double>(*value);
    };
  };
  per_gpu("ddprun_rank_gpu_utilization_ratio", "gauge",
          "Fraction of the driver's last sample period (1/6 s to 1 s) in which a kernel ran on the GPU (NVML).",
          [](const RankGpu& gpu) -> std::optional<double> {
            if (!gpu.utilisation_percent) return std::nullopt;
            return *gpu.utilisation_percent / 100.0;
          });
  per_gpu("ddprun_rank_gpu_memory_used_bytes", "gauge", "GPU memory used by every process on the GPU (NVML).",
          known([](const RankGpu& gpu) { return gpu.memory_used_bytes; }));
  per_gpu("ddprun_rank_gpu_memory_total_bytes", "gauge", "The GPU's memory (NVML).",
          known([](const RankGpu& gpu) { return gpu.memory_total_bytes; }));
  per_gpu("ddprun_rank_gpu_own_memory_bytes", "gauge",
          "GPU memory held by the rank's own process tree on the GPU (NVML's process list).",
          known([](const RankGpu& gpu) { return gpu.own_memory_bytes; }));
  per_gpu("ddprun_rank_gpu_temperature_celsius", "gauge", "The GPU die's temperature (NVML).",
          known([](const RankGpu& gpu) { return gpu.temperature_c; }));
  per_gpu("ddprun_rank_gpu_power_watts", "gauge", "The GPU's power draw (NVML).",
          known([](const RankGpu& gpu) { return gpu.power_watts; }));
  out.family("ddprun_rank_gpu_throttled", "gauge", "1 for each clock throttle reason active on the GPU (NVML).");
  for (const auto& ref : gpus) {
    std::set<std::string> said;
    for (const std::string& reason : ref.gpu->throttle) {
      if (said.insert(reason).second) out.sample(ref.labels + ",reason=\"" + escape_label_value(reason) + "\"", 1);
    }
  }
  per_gpu("ddprun_rank_gpu_uncorrectable_ecc_errors", "gauge",
          "Uncorrectable ECC errors on the GPU since the driver loaded (NVML, volatile).",
          known([](const RankGpu& gpu) { return gpu.uncorrectable_ecc_errors; }));
  per_gpu("ddprun_rank_gpu_xids_total", "counter", "Xid critical errors on the GPU since ddprun began watching it.",
          [](const RankGpu& gpu) -> std::optional<double> { return static_cast<double>(gpu.xid_count); });
  per_gpu("ddprun_rank_gpu_healthy", "gauge",
          "0 when the GPU has a health problem (lost, needs a reset, ECC, pages or rows pending), else 1.",
          [](const RankGpu& gpu) -> std::optional<double> { return gpu.problem.empty() ? 1 : 0; });
  per_rank("ddprun_rank_gpu_straggler", "gauge",
           "1 when the utilisation of the rank's GPUs is persistently far below the other ranks'.",
           [](const RankStatus& r) -> std::optional<double> {
             if (r.gpus.empty()) return std::nullopt;
             return r.gpu_straggler ? 1 : 0;
           });

  out.family("ddprun_rank_state", "gauge", "1 for the rank's current state, 0 for the others.");
  for (const auto& ref : ranks) {
    for (RankState state : {RankState::starting, RankState::running, RankState::exited, RankState::failed,
                            RankState::stopped}) {
      out.sample(ref.labels + ",state=\"" + rank_state_name(state) + "\"", ref.rank->state == state ? 1 : 0);
    }
  }

  out.family("ddprun_restarts_total", "counter", "Restarts of the worker group so far, as the node counts them.");
  for (const auto& node : job.nodes) out.sample(node_labels(node), node.restarts);
  out.family("ddprun_hangs_total", "counter", "Hangs detected so far (no rank progressed for --hang-timeout).");
  for (const auto& node : job.nodes) out.sample(node_labels(node), node.hangs);
  out.family("ddprun_node_attempt", "gauge", "The node's current attempt (the log folder's attempt_N).");
  for (const auto& node : job.nodes) out.sample(node_labels(node), node.attempt);
  out.family("ddprun_warm_interpreters", "gauge",
             "--preload's interpreters waiting to become the next start's workers, by state (importing, ready).");
  for (const auto& node : job.nodes) {
    const auto ready = std::count_if(node.warm.begin(), node.warm.end(), [](const WarmInterpreter& w) { return w.ready; });
    out.sample(node_labels(node) + ",state=\"importing\"", static_cast<double>(node.warm.size()) - static_cast<double>(ready));
    out.sample(node_labels(node) + ",state=\"ready\"", static_cast<double>(ready));
  }
  out.family("ddprun_node_sampled_at_seconds", "gauge", "Unix time of the node's last status sample.");
  for (const auto& node : job.nodes) out.sample(node_labels(node), node.sampled_at);

  out.family("ddprun_status_requests_total", "counter", "Requests the status endpoint answered.");
  out.sample("", static_cast<double>(counters.requests));
  out.family("ddprun_status_refused_connections_total", "counter",
             "Connections the status endpoint closed for its connection limit.");
  out.sample("", static_cast<double>(counters.refused_connections));
  out.family("ddprun_status_dropped_connections_total", "counter",
             "Connections the status endpoint closed for a bound: header size, a body, a deadline.");
  out.sample("", static_cast<double>(counters.dropped_connections));
  return out.take();
}

}  // namespace ddprun::launcher

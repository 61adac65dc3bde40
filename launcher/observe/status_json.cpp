#include "launcher/observe/status_json.hpp"

#include <optional>
#include <string>

namespace ddprun::launcher {

using nlohmann::json;

namespace {

/// `json[key]` as T when present, else `fallback`: fields added later read as their default.
template <typename T>
T field(const json& object, const char* key, T fallback = T{}) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  return it->get<T>();
}

/// `json[key]` as T when present and not null, else nothing: an unknown value stays unknown.
template <typename T>
std::optional<T> optional_field(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

template <typename T>
json optional_json(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

/// `text` cut to at most `bytes`, on a UTF-8 character boundary.
std::string cut(std::string text, std::size_t bytes) {
  if (text.size() <= bytes) return text;
  std::size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
  return text;
}

/// `object` itself, checked to be an object: a status of another shape is an error, not zeros.
const json& object_of(const json& object) {
  (void)object.get_ref<const json::object_t&>();  // throws type_error when it is not an object
  return object;
}

/// The array `object[key]`, empty when absent; throws type_error when it is something else.
json::array_t items(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return {};
  return it->get<json::array_t>();
}

/// The array `object[key]` (empty when absent; type_error when it is something else), without a
/// copy: a bounded reader takes only part of it.
const json::array_t& array_ref(const json& object, const char* key) {
  static const json::array_t none;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return none;
  return it->get_ref<const json::array_t&>();
}

json to_json(const ProgressSample& progress) {
  return {{"step", progress.step},
          {"samples", progress.samples},
          {"text", progress.text},
          {"age_seconds", progress.age_seconds},
          {"steps_per_second", progress.steps_per_second},
          {"samples_per_second", progress.samples_per_second}};
}

ProgressSample progress_from_json(const json& object) {
  object_of(object);
  ProgressSample progress;
  progress.step = field<std::int64_t>(object, "step");
  progress.samples = field<std::int64_t>(object, "samples");
  progress.text = field<std::string>(object, "text");
  progress.age_seconds = field<double>(object, "age_seconds");
  progress.steps_per_second = field<double>(object, "steps_per_second");
  progress.samples_per_second = field<double>(object, "samples_per_second");
  return progress;
}

json to_json(const RankGpu& gpu) {
  return {{"index", gpu.index},
          {"uuid", gpu.uuid},
          {"bus_id", gpu.bus_id},
          {"utilisation_percent", optional_json(gpu.utilisation_percent)},
          {"memory_used_bytes", optional_json(gpu.memory_used_bytes)},
          {"memory_total_bytes", optional_json(gpu.memory_total_bytes)},
          {"own_memory_bytes", optional_json(gpu.own_memory_bytes)},
          {"temperature_c", optional_json(gpu.temperature_c)},
          {"power_watts", optional_json(gpu.power_watts)},
          {"throttle", gpu.throttle},
          {"uncorrectable_ecc_errors", optional_json(gpu.uncorrectable_ecc_errors)},
          {"xid_count", gpu.xid_count},
          {"xids", gpu.xids},
          {"problem", gpu.problem}};
}

/// A GPU as another node wrote it, held to the kStatus* bounds (status_json.hpp).
RankGpu gpu_from_json(const json& object) {
  object_of(object);
  RankGpu gpu;
  gpu.index = field<unsigned int>(object, "index");
  gpu.uuid = cut(field<std::string>(object, "uuid"), kStatusGpuNameBytes);
  gpu.bus_id = cut(field<std::string>(object, "bus_id"), kStatusGpuNameBytes);
  gpu.utilisation_percent = optional_field<unsigned int>(object, "utilisation_percent");
  gpu.memory_used_bytes = optional_field<std::uint64_t>(object, "memory_used_bytes");
  gpu.memory_total_bytes = optional_field<std::uint64_t>(object, "memory_total_bytes");
  gpu.own_memory_bytes = optional_field<std::uint64_t>(object, "own_memory_bytes");
  gpu.temperature_c = optional_field<unsigned int>(object, "temperature_c");
  gpu.power_watts = optional_field<double>(object, "power_watts");
  const json::array_t& throttle = array_ref(object, "throttle");
  for (std::size_t i = 0; i < throttle.size() && i < kStatusThrottleNames; ++i) {
    gpu.throttle.push_back(cut(throttle[i].get<std::string>(), kStatusGpuNameBytes));
  }
  gpu.uncorrectable_ecc_errors = optional_field<std::uint64_t>(object, "uncorrectable_ecc_errors");
  gpu.xid_count = field<std::uint64_t>(object, "xid_count");
  // The newest Xids are the last: those are kept.
  const json::array_t& xids = array_ref(object, "xids");
  for (std::size_t i = xids.size() > kStatusXidsPerGpu ? xids.size() - kStatusXidsPerGpu : 0; i < xids.size(); ++i) {
    gpu.xids.push_back(xids[i].get<unsigned long long>());
  }
  gpu.problem = cut(field<std::string>(object, "problem"), kStatusGpuTextBytes);
  return gpu;
}

}  // namespace

json to_json(const RankStatus& rank) {
  json object = {{"rank", rank.rank},
                 {"local_rank", rank.local_rank},
                 {"pid", rank.pid},
                 {"state", rank_state_name(rank.state)},
                 {"exitcode", rank.exitcode},
                 {"cpu_percent", rank.cpu_percent},
                 {"cpu_seconds", rank.cpu_seconds},
                 {"rss_bytes", rank.rss_bytes},
                 {"output_age_seconds", rank.output_age_seconds},
                 {"straggler", rank.straggler},
                 {"gpu_straggler", rank.gpu_straggler}};
  object["progress"] = rank.progress ? to_json(*rank.progress) : json(nullptr);
  json gpus = json::array();
  for (const RankGpu& gpu : rank.gpus) gpus.push_back(to_json(gpu));
  object["gpus"] = std::move(gpus);
  return object;
}

json to_json(const NodeStatus& node) {
  json ranks = json::array();
  for (const auto& rank : node.ranks) ranks.push_back(to_json(rank));
  json warm = json::array();
  for (const auto& interpreter : node.warm) {
    warm.push_back({{"local_rank", interpreter.local_rank},
                    {"pid", interpreter.pid},
                    {"state", interpreter.ready ? "ready" : "importing"}});
  }
  return {{"node_rank", node.node_rank}, {"host", node.host},         {"attempt", node.attempt},
          {"restarts", node.restarts},   {"hangs", node.hangs},       {"sampled_at", node.sampled_at},
          {"ranks", std::move(ranks)},   {"warm", std::move(warm)},   {"gpu_note", node.gpu_note}};
}

json to_json(const JobStatus& job) {
  json nodes = json::array();
  for (const auto& node : job.nodes) nodes.push_back(to_json(node));
  return {{"run_id", job.run_id}, {"world_size", job.world_size}, {"nodes", std::move(nodes)}};
}

json to_json(const RankStacks& stacks) {
  json threads = json::array();
  for (const auto& thread : stacks.threads) {
    json frames = json::array();
    for (const auto& frame : thread.frames) frames.push_back({{"function", frame.function}, {"location", frame.location}});
    threads.push_back({{"name", thread.name}, {"python", thread.python}, {"frames", std::move(frames)}});
  }
  return {{"rank", stacks.rank}, {"node_rank", stacks.node_rank}, {"pid", stacks.pid},
          {"error", stacks.error}, {"file", stacks.file},          {"threads", std::move(threads)}};
}

RankStatus rank_status_from_json(const json& object) {
  object_of(object);
  RankStatus rank;
  rank.rank = field<int>(object, "rank");
  rank.local_rank = field<int>(object, "local_rank");
  rank.pid = field<pid_t>(object, "pid");
  rank.state = parse_rank_state(field<std::string>(object, "state", "starting")).value_or(RankState::starting);
  rank.exitcode = field<int>(object, "exitcode");
  rank.cpu_percent = field<double>(object, "cpu_percent");
  rank.cpu_seconds = field<double>(object, "cpu_seconds");
  rank.rss_bytes = field<std::uint64_t>(object, "rss_bytes");
  rank.output_age_seconds = field<double>(object, "output_age_seconds", -1);
  rank.straggler = field<bool>(object, "straggler");
  auto progress = object.find("progress");
  if (progress != object.end() && progress->is_object()) rank.progress = progress_from_json(*progress);
  const json::array_t& gpus = array_ref(object, "gpus");
  for (std::size_t i = 0; i < gpus.size() && i < kStatusGpusPerRank; ++i) rank.gpus.push_back(gpu_from_json(gpus[i]));
  rank.gpu_straggler = field<bool>(object, "gpu_straggler");
  return rank;
}

NodeStatus node_status_from_json(const json& object) {
  object_of(object);
  NodeStatus node;
  node.node_rank = field<int>(object, "node_rank");
  node.host = field<std::string>(object, "host");
  node.attempt = field<int>(object, "attempt");
  node.restarts = field<int>(object, "restarts");
  node.hangs = field<int>(object, "hangs");
  node.sampled_at = field<double>(object, "sampled_at");
  for (const auto& rank : items(object, "ranks")) node.ranks.push_back(rank_status_from_json(rank));
  for (const auto& interpreter : items(object, "warm")) {
    object_of(interpreter);
    node.warm.push_back(WarmInterpreter{field<int>(interpreter, "local_rank"), field<pid_t>(interpreter, "pid"),
                                        field<std::string>(interpreter, "state") == "ready"});
  }
  node.gpu_note = cut(field<std::string>(object, "gpu_note"), kStatusGpuTextBytes);
  return node;
}

JobStatus job_status_from_json(const json& object) {
  object_of(object);
  JobStatus job;
  job.run_id = field<std::string>(object, "run_id");
  job.world_size = field<int>(object, "world_size");
  for (const auto& node : items(object, "nodes")) job.nodes.push_back(node_status_from_json(node));
  return job;
}

RankStacks rank_stacks_from_json(const json& object) {
  object_of(object);
  RankStacks stacks;
  stacks.rank = field<int>(object, "rank");
  stacks.node_rank = field<int>(object, "node_rank");
  stacks.pid = field<pid_t>(object, "pid");
  stacks.error = field<std::string>(object, "error");
  stacks.file = field<std::string>(object, "file");
  for (const auto& thread : items(object, "threads")) {
    ThreadStack stack;
    stack.name = field<std::string>(thread, "name");
    stack.python = field<bool>(thread, "python");
    for (const auto& frame : items(thread, "frames")) {
      stack.frames.push_back({field<std::string>(frame, "function"), field<std::string>(frame, "location")});
    }
    stacks.threads.push_back(std::move(stack));
  }
  return stacks;
}

}  // namespace ddprun::launcher

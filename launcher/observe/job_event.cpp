#include "launcher/observe/job_event.hpp"

#include <stdexcept>

namespace ddprun::launcher {

using nlohmann::json;

namespace {
constexpr struct {
  JobEventKind kind;
  const char* name;
} kEventNames[] = {
    {JobEventKind::job_started, "job_started"},       {JobEventKind::round_formed, "round_formed"},
    {JobEventKind::node_joined, "node_joined"},       {JobEventKind::node_lost, "node_lost"},
    {JobEventKind::worker_started, "worker_started"}, {JobEventKind::worker_exited, "worker_exited"},
    {JobEventKind::restart, "restart"},               {JobEventKind::hang_detected, "hang_detected"},
    {JobEventKind::straggler, "straggler"},           {JobEventKind::stacks_written, "stacks_written"},
    {JobEventKind::job_finished, "job_finished"},
};

constexpr const char* kFixedFields[] = {"time", "event", "node_rank", "rank", "pid"};
}  // namespace

const char* job_event_name(JobEventKind kind) {
  for (const auto& entry : kEventNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "unknown";
}

std::optional<JobEventKind> parse_job_event_name(const std::string& name) {
  for (const auto& entry : kEventNames) {
    if (name == entry.name) return entry.kind;
  }
  return std::nullopt;
}

json to_json(const JobEvent& event) {
  json object = json::object();
  if (event.detail.is_object()) object = event.detail;
  object["time"] = event.time;
  object["event"] = job_event_name(event.kind);
  if (event.node_rank >= 0) object["node_rank"] = event.node_rank; else object.erase("node_rank");
  if (event.rank >= 0) object["rank"] = event.rank; else object.erase("rank");
  if (event.pid > 0) object["pid"] = event.pid; else object.erase("pid");
  return object;
}

JobEvent job_event_from_json(const json& object) {
  JobEvent event;
  const auto name = object.at("event").get<std::string>();
  auto kind = parse_job_event_name(name);
  if (!kind) throw std::invalid_argument("unknown event \"" + name + "\"");
  event.kind = *kind;
  event.time = object.at("time").get<double>();
  event.node_rank = object.value("node_rank", -1);
  event.rank = object.value("rank", -1);
  event.pid = object.value("pid", pid_t{0});
  event.detail = object;
  for (const char* fixed : kFixedFields) event.detail.erase(fixed);
  return event;
}

}  // namespace ddprun::launcher

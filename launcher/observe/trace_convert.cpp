#include "launcher/observe/trace_convert.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "common/bounded_json.hpp"

namespace ddprun::launcher {

using nlohmann::json;

namespace {

constexpr int kAgentThread = 0;
constexpr int kJobProcess = 0;  ///< events about no node in particular

int process_of(int node_rank) { return node_rank < 0 ? kJobProcess : node_rank + 1; }
int thread_of(int rank) { return rank < 0 ? kAgentThread : rank + 1; }

/// A detail member as text, or "" when absent.
std::string text_of(const json& detail, const char* key) {
  auto it = detail.find(key);
  if (it == detail.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

class TraceBuilder {
 public:
  explicit TraceBuilder(double origin) : origin_(origin) {}

  void add(const JobEvent& e) {
    last_time_ = std::max(last_time_, e.time);
    const int pid = process_of(e.node_rank);
    if ((e.kind == JobEventKind::job_started || e.kind == JobEventKind::node_joined) && e.detail.contains("host")) {
      hosts_[pid] = text_of(e.detail, "host");
    }
    switch (e.kind) {
      case JobEventKind::job_started:
        jobs_[agent_of(e)] = e;
        break;
      case JobEventKind::job_finished: {
        end_round(pid, e.time);
        // A dynamic job's agent learns its node rank after it started: the job is matched by agent.
        auto it = jobs_.find(agent_of(e));
        json args = e.detail;
        if (it != jobs_.end()) {
          args["command"] = it->second.detail.value("command", json::array());
          complete(pid, kAgentThread, "job", it->second.time, e.time, args, "agent");
          jobs_.erase(it);
        } else {
          instant(pid, kAgentThread, "job finished", e.time, args, "t");
        }
        break;
      }
      case JobEventKind::round_formed:
        end_round(pid, e.time);
        rounds_[pid] = e;
        break;
      case JobEventKind::worker_started:
        note_thread(pid, e.rank);
        workers_[{pid, e.pid}] = e;
        break;
      case JobEventKind::worker_exited: {
        note_thread(pid, e.rank);
        auto it = workers_.find({pid, e.pid});
        if (it == workers_.end()) {
          instant(pid, thread_of(e.rank), "exited: " + text_of(e.detail, "description"), e.time, e.detail, "t");
          break;
        }
        worker_slice(it->second, &e, e.time);
        workers_.erase(it);
        break;
      }
      case JobEventKind::restart:
        instant(pid, kAgentThread, "restart " + text_of(e.detail, "restart_count"), e.time, e.detail, "p");
        break;
      case JobEventKind::hang_detected:
        instant(pid, kAgentThread, "hang detected", e.time, e.detail, "g");
        break;
      case JobEventKind::node_joined:
      case JobEventKind::node_lost: {
        // Every agent of a round records the nodes it saw join or go: one of each.
        const std::string name = e.kind == JobEventKind::node_joined ? "node joined" : "node lost";
        const std::string key = name + "|" + text_of(e.detail, "node") + "|" + text_of(e.detail, "round") + "|" +
                                text_of(e.detail, "reason");
        if (!node_events_seen_.insert(key).second) break;
        instant(pid, kAgentThread, name, e.time, e.detail, "p");
        break;
      }
      case JobEventKind::straggler:
        note_thread(pid, e.rank);
        instant(pid, thread_of(e.rank), "straggler", e.time, e.detail, "t");
        break;
      case JobEventKind::stacks_written:
        note_thread(pid, e.rank);
        instant(pid, thread_of(e.rank), "stacks written", e.time, e.detail, "t");
        break;
    }
  }

  /// What is still open at the end of the log lasts to its last event.
  json finish() {
    for (auto& [pid, round] : rounds_) round_slice(pid, round, last_time_);
    rounds_.clear();
    for (auto& [agent, job] : jobs_) {
      json args = job.detail;
      args["exit_status"] = "unknown: the log ends while the job runs";
      complete(process_of(job.node_rank), kAgentThread, "job", job.time, last_time_, args, "agent");
    }
    jobs_.clear();
    for (auto& [key, started] : workers_) worker_slice(started, nullptr, last_time_);
    workers_.clear();

    json trace = json::array();
    for (int pid : processes_) {
      std::string name = pid == kJobProcess ? "job" : "node " + std::to_string(pid - 1);
      if (auto host = hosts_.find(pid); host != hosts_.end() && pid != kJobProcess) name += " (" + host->second + ")";
      trace.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
      trace.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
      trace.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", kAgentThread}, {"args", {{"name", "agent"}}}});
    }
    for (const auto& [pid, rank] : threads_) {
      trace.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", thread_of(rank)},
                       {"args", {{"name", "rank " + std::to_string(rank)}}}});
      trace.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", thread_of(rank)},
                       {"args", {{"sort_index", thread_of(rank)}}}});
    }
    for (json& event : events_) trace.push_back(std::move(event));
    return {{"traceEvents", std::move(trace)},
            {"displayTimeUnit", "ms"},
            {"otherData", {{"source", "ddprun trace"}, {"origin_unix_time", origin_}}}};
  }

 private:
  double micros(double time) const { return std::round((time - origin_) * 1e6); }

  /// The agent that recorded a job_started / job_finished: its host and pid.
  static std::string agent_of(const JobEvent& e) { return text_of(e.detail, "host") + "|" + text_of(e.detail, "agent_pid"); }
  void note_thread(int pid, int rank) {
    if (rank >= 0) threads_.insert({pid, rank});
  }

  void complete(int pid, int tid, const std::string& name, double start, double end, const json& args,
                const std::string& category, const char* colour = nullptr) {
    json event = {{"ph", "X"},     {"name", name},          {"cat", category},
                  {"pid", pid},    {"tid", tid},            {"ts", micros(start)},
                  {"dur", std::max(0.0, micros(end) - micros(start))}, {"args", args}};
    if (colour != nullptr) event["cname"] = colour;
    processes_.insert(pid);
    events_.push_back(std::move(event));
  }
  /// `scope`: "t" its track, "p" its node, "g" the whole trace.
  void instant(int pid, int tid, const std::string& name, double time, const json& args, const char* scope) {
    processes_.insert(pid);
    events_.push_back({{"ph", "i"}, {"name", name}, {"cat", "event"}, {"pid", pid}, {"tid", tid},
                       {"ts", micros(time)}, {"s", scope}, {"args", args}});
  }

  void worker_slice(const JobEvent& started, const JobEvent* exited, double end) {
    const int pid = process_of(started.node_rank);
    json args = started.detail;
    args["pid"] = started.pid;
    const char* colour = nullptr;
    if (exited != nullptr) {
      for (const auto& [key, value] : exited->detail.items()) args[key] = value;
      const bool failed = exited->detail.value("failed", false);
      colour = failed ? "terrible" : exited->detail.value("exitcode", 0) == 0 ? "good" : "grey";
    } else {
      args["exit"] = "none in the log: running at its end";
    }
    std::string name = "rank " + std::to_string(started.rank);
    if (started.detail.contains("attempt")) name += " attempt " + text_of(started.detail, "attempt");
    complete(pid, thread_of(started.rank), name, started.time, end, args, "worker", colour);
  }

  void end_round(int pid, double time) {
    auto it = rounds_.find(pid);
    if (it == rounds_.end()) return;
    round_slice(pid, it->second, time);
    rounds_.erase(it);
  }
  void round_slice(int pid, const JobEvent& formed, double end) {
    complete(pid, kAgentThread, "round " + text_of(formed.detail, "round"), formed.time, end, formed.detail, "round");
  }

  double origin_;
  double last_time_ = 0;
  std::set<int> processes_;               ///< those with an event
  std::map<int, std::string> hosts_;      ///< by process, as job_started / node_joined said
  std::set<std::pair<int, int>> threads_;  ///< (process, rank)
  std::map<std::string, JobEvent> jobs_;  ///< by agent: job_started not yet finished
  std::map<int, JobEvent> rounds_;         ///< by process: the round in progress
  std::map<std::pair<int, pid_t>, JobEvent> workers_;  ///< by (process, pid): started, not yet exited
  std::set<std::string> node_events_seen_;
  std::vector<json> events_;
};

}  // namespace

EventLines read_event_lines(std::string_view text) {
  EventLines result;
  std::size_t number = 0;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    try {
      const json object = common::parse_bounded_json(line);
      if (!object.is_object()) throw std::invalid_argument("not a JSON object");
      result.events.push_back(job_event_from_json(object));
    } catch (const json::parse_error& e) {
      result.bad.push_back({number, common::is_too_deep(e) ? common::json_too_deep_words() : "not JSON"});
    } catch (const json::exception& e) {
      // nlohmann's words start with "[json.exception.type_error.302] ": keep what follows.
      std::string why = e.what();
      if (auto close = why.find("] "); close != std::string::npos) why.erase(0, close + 2);
      result.bad.push_back({number, why});
    } catch (const std::exception& e) {
      result.bad.push_back({number, e.what()});
    }
  }
  return result;
}

json chrome_trace(std::vector<JobEvent> events) {
  std::stable_sort(events.begin(), events.end(), [](const JobEvent& a, const JobEvent& b) { return a.time < b.time; });
  TraceBuilder builder(events.empty() ? 0.0 : events.front().time);
  for (const JobEvent& event : events) builder.add(event);
  return builder.finish();
}

}  // namespace ddprun::launcher

#include "launcher/workers/warm_plan.hpp"


namespace ddprun::launcher {

Environ warm_environment(const Environ& base, const Environ& worker_env) {
  Environ env = base;
  for (std::string_view name : kReadBeforeGo) {
    const std::string key(name);
    if (auto it = worker_env.find(key); it != worker_env.end()) {
      env[key] = it->second;
    } else {
      env.erase(key);
    }
  }
  return env;
}

WarmStart warm_start_of(const WorkerSpec& spec, const Environ& base, const Environ& worker_env) {
  return WarmStart{spec.local_rank, spec.executable, spec.argv, spec.terminal, spec.cpu_affinity,
                   warm_environment(base, worker_env)};
}

bool may_become(const WarmStart& start, bool has_stdin, const WorkerSpec& spec, const Environ& base,
                const Environ& worker_env) {
  return (has_stdin || !spec.reads_stdin) && start == warm_start_of(spec, base, worker_env);
}

std::string go_message(const std::string& executable, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env_entries, bool null_stdin) {
  std::string payload;
  auto add = [&payload](const std::string& field) {
    payload.append(field);
    payload.push_back('\0');
  };
  add(executable);
  add(std::to_string(argv.size()));
  for (const auto& arg : argv) add(arg);
  for (const auto& entry : env_entries) add(entry);
  return "go " + std::to_string(payload.size()) + (null_stdin ? " null" : " keep") + "\n" + payload;
}

WarmReport parse_warm_report(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  const auto space = line.find(' ');
  const std::string_view word = line.substr(0, space);
  const std::string text(space == std::string_view::npos ? std::string_view() : line.substr(space + 1));
  if (word == "hello" && text.empty()) return {WarmReport::Kind::hello, ""};
  if (word == "ready" && text.empty()) return {WarmReport::Kind::ready, ""};
  if (word == "failed") return {WarmReport::Kind::failed, text};
  if (word == "cuda") return {WarmReport::Kind::cuda, text};
  return {WarmReport::Kind::unknown, std::string(line)};
}

std::string describe_cold_start(const WarmReport& report, int local_rank) {
  const std::string rank = std::to_string(local_rank);
  switch (report.kind) {
    case WarmReport::Kind::failed:
      return "warning: --preload failed on local rank " + rank + " (" + report.text + "): the workers start cold";
    case WarmReport::Kind::cuda:
      return "error: --preload refused: importing " + report.text +
             " initialised CUDA, which must wait for each worker's CUDA_VISIBLE_DEVICES: the workers start cold";
    default:
      return "warning: --preload: local rank " + rank + "'s warm interpreter said \"" + report.text +
             "\": the workers start cold";
  }
}

std::string describe_warm_death(int local_rank, const std::string& how) {
  return "warning: --preload: local rank " + std::to_string(local_rank) + "'s warm interpreter ended (" + how +
         ") before it became a worker: the workers start cold";
}

}  // namespace ddprun::launcher

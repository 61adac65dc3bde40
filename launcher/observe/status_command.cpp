#include "launcher/observe/status_command.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/bounded_json.hpp"
#include "launcher/base/unix_time.hpp"
#include "launcher/output/console.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/observe/run_registry.hpp"
#include "launcher/observe/stack_digest.hpp"
#include "launcher/observe/status_client.hpp"
#include "launcher/observe/status_json.hpp"
#include "launcher/observe/status_table.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/store_error.hpp"

namespace ddprun::launcher {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::chrono::seconds kStatusTimeout{10};
/// A capture attaches a debugger to every rank: allow it the endpoint's own limit.
constexpr std::chrono::seconds kStacksTimeout{130};

struct Target {
  StatusAddress address;
  std::string title;  ///< "run ID (pid P, DIR)"
};

std::string usage(const std::string& command) {
  return "usage: ddprun " + command + " [--json] [RUN_ID|PID|LOG_DIR|HOST:PORT]";
}

std::string help_text(const std::string& command) {
  std::string what = command == "status" ? "Prints the status of a running ddprun job: a line per rank.\n"
                                         : "Prints the stacks of every rank of a running ddprun job, grouped.\n";
  return usage(command) + "\n\n" + what +
         "\nWhich job: RUN_ID (--rdzv-id), PID (of the ddprun agent), LOG_DIR (its --log-dir or run folder),\n"
         "HOST:PORT (a --status-port endpoint; DDPRUN_STORE_TOKEN is sent when set). Without one: the only\n"
         "running job of this user.\n\n"
         "  --json   print the endpoint's JSON as it is\n";
}

bool is_socket_file(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISSOCK(info.st_mode);
}

/// HOST:PORT or http://HOST:PORT[/]: a TCP endpoint; nothing for anything else.
std::optional<rendezvous::Endpoint> as_endpoint(std::string text) {
  if (text.rfind("http://", 0) == 0) {
    text = text.substr(7);
    if (auto slash = text.find('/'); slash != std::string::npos) text = text.substr(0, slash);
  }
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) return std::nullopt;
  for (char c : text.substr(colon + 1)) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  if (text.find('/') != std::string::npos) return std::nullopt;
  try {
    return rendezvous::parse_endpoint(text, 0);
  } catch (const rendezvous::Error&) {
    return std::nullopt;
  }
}

std::string describe_run(const RunEntry& run) {
  return "run " + run.run_id + " (pid " + std::to_string(run.pid) + ", " + run.run_dir + ")";
}

Target target_of(const RunEntry& run) {
  Target target;
  target.address.unix_socket = run.socket;
  target.title = describe_run(run);
  return target;
}

/// Thrown once the runs to pick from are listed: the command ends with status 2, nothing more said.
struct RunsListed {};

/// Several runs match: they are listed with how to pick one, and the command ends with status 2.
[[noreturn]] void ambiguous(const std::vector<RunEntry>& runs, const std::string& command, const std::string& what) {
  std::string text = "ddprun: " + what + ":\n";
  for (const auto& run : runs) {
    char when[32] = "";
    std::time_t started = static_cast<std::time_t>(run.started_at);
    std::tm local{};
    if (::localtime_r(&started, &local) != nullptr) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &local);
    text += "  " + run.run_id + "  pid " + std::to_string(run.pid) + "  started " + when + "  " + run.run_dir + "  " +
            run.command + "\n";
  }
  text += "pick one: ddprun " + command + " RUN_ID, PID or LOG_DIR\n";
  write_all(STDERR_FILENO, text);
  throw RunsListed{};
}

Target find_target(const std::optional<std::string>& argument, const std::string& command, const Environ& env) {
  if (argument) {
    if (auto endpoint = as_endpoint(*argument); endpoint && !fs::exists(*argument)) {
      Target target;
      target.address.host = endpoint->host;
      target.address.port = endpoint->port;
      target.title = "job at " + target.address.describe();
      return target;
    }
  }
  const fs::path registry = open_registry_folder(env);
  std::vector<RunEntry> runs = registered_runs(registry);
  if (!argument) {
    if (runs.empty()) throw LaunchError("no running ddprun job of yours (none is registered in " + registry.string() + ")");
    if (runs.size() > 1) ambiguous(runs, command, std::to_string(runs.size()) + " jobs of yours are running");
    return target_of(runs.front());
  }
  std::vector<RunEntry> named = runs_named(runs, *argument);
  if (named.size() == 1) return target_of(named.front());
  if (named.size() > 1) ambiguous(named, command, std::to_string(named.size()) + " running jobs match " + *argument);
  // A log folder of a job registered elsewhere (another XDG_RUNTIME_DIR): its socket says it all.
  const fs::path folder(*argument);
  if (is_socket_file(folder / "status.sock")) {
    return {StatusAddress{(folder / "status.sock").string(), "", 0}, "run in " + folder.string()};
  }
  std::error_code ec;
  std::vector<fs::path> sockets;
  for (const auto& item : fs::directory_iterator(folder, ec)) {
    if (is_socket_file(item.path() / "status.sock")) sockets.push_back(item.path() / "status.sock");
  }
  if (sockets.size() == 1) return {StatusAddress{sockets.front().string(), "", 0}, "run in " + sockets.front().parent_path().string()};
  if (sockets.size() > 1) {
    throw UsageError(std::to_string(sockets.size()) + " runs are serving in " + folder.string() +
                     ": name one of its run folders");
  }
  throw LaunchError("no running ddprun job is " + *argument + " (not a run id, agent pid, log folder or HOST:PORT of " +
                    std::to_string(runs.size()) + " running job(s) registered in " + registry.string() + ")");
}

std::optional<std::string> token_for(const Target& target, const Environ& env) {
  if (!target.address.unix_socket.empty()) return std::nullopt;
  try {
    return rendezvous::auth::token_from_environment([&env](const char* name) { return lookup(env, name); });
  } catch (const rendezvous::StoreError& error) {
    throw UsageError(error.what());
  }
}

/// The endpoint's error text, or the HTTP status when it gave none.
std::string endpoint_error(const StatusReply& reply) {
  try {
    return common::parse_bounded_json(reply.body).at("error").get<std::string>();
  } catch (const std::exception&) {
    return "HTTP status " + std::to_string(reply.status);
  }
}

}  // namespace

bool is_status_command(const std::vector<std::string>& args) {
  return !args.empty() && (args.front() == "status" || args.front() == "stacks");
}

int run_status_command(const std::vector<std::string>& args, const Environ& env) {
  const std::string command = args.front();
  bool raw_json = false;
  std::optional<std::string> argument;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      write_all(STDOUT_FILENO, help_text(command));
      return kExitSuccess;
    }
    if (arg == "--json") {
      raw_json = true;
    } else if (!arg.empty() && arg.front() == '-') {
      throw UsageError(arg + ": unknown option; " + usage(command));
    } else if (argument) {
      throw UsageError(arg + ": one job at a time; " + usage(command));
    } else {
      argument = arg;
    }
  }
  Target target;
  try {
    target = find_target(argument, command, env);
  } catch (const RunsListed&) {
    return kExitUsage;
  }
  const bool stacks = command == "stacks";
  StatusReply reply = fetch_status(target.address, stacks ? "/api/stacks" : "/api/status", token_for(target, env),
                                   stacks ? kStacksTimeout : kStatusTimeout);
  if (reply.status != 200) {
    throw LaunchError(std::string(stacks ? "no stacks" : "no status") + " from " + target.title + ": " +
                      endpoint_error(reply));
  }
  if (raw_json) {
    write_all(STDOUT_FILENO, reply.body + "\n");
    return kExitSuccess;
  }
  json body;
  try {
    body = common::parse_bounded_json(reply.body);
    if (!stacks) {
      write_all(STDOUT_FILENO, format_status_table(job_status_from_json(body), unix_now(), target.title));
      return kExitSuccess;
    }
    std::vector<RankStacks> ranks;
    for (const auto& rank : body.at("ranks")) ranks.push_back(rank_stacks_from_json(rank));
    std::vector<std::string> digest = body.value("digest", std::vector<std::string>{});
    if (digest.empty()) digest = stack_digest(ranks);
    write_all(STDOUT_FILENO, format_stacks(ranks, digest));
  } catch (const json::exception& error) {
    throw LaunchError("cannot read the reply of " + target.title + ": " + error.what());
  }
  return kExitSuccess;
}

}  // namespace ddprun::launcher

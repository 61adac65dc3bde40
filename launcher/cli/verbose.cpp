#include "launcher/cli/verbose.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string_view>

#include "launcher/base/signal_names.hpp"
#include "rendezvous/endpoint.hpp"

namespace ddprun::launcher {
namespace {

bool plain(std::string_view word) {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("-_./=:,+@%^").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

std::string quote_word(std::string_view word) {
  if (plain(word)) return std::string(word);
  std::string quoted = "'";
  for (unsigned char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);  // one line, whatever the argument holds
      quoted += escaped;
    } else {
      quoted += static_cast<char>(c);
    }
  }
  return quoted + "'";
}

std::string join_conf(const std::map<std::string, std::string>& conf) {
  std::string text;
  for (const auto& [key, value] : conf) text += (text.empty() ? "" : ",") + key + "=" + value;
  return text.empty() ? "(none)" : text;
}

std::string signal_list(const std::vector<int>& signals) {
  std::string text;
  for (int signo : signals) text += (text.empty() ? "" : ",") + signal_name(signo);
  return text.empty() ? "none" : text;
}

}  // namespace

std::string quote_command(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& word : argv) line += (line.empty() ? "" : " ") + quote_word(word);
  return line;
}

std::vector<std::string> describe_launch_config(const LaunchConfig& config, const LaunchFacts& facts) {
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("entrypoint", quote_command({config.program}));
  rows.emplace_back("command", quote_command(facts.argv) + (facts.executable.empty() || facts.argv.empty() ||
                                                                    facts.executable == facts.argv.front()
                                                                ? ""
                                                                : " (exec " + quote_command({facts.executable}) + ")"));
  if (facts.interpreter) rows.emplace_back("interpreter", *facts.interpreter);
  const Topology& topology = config.topology;
  rows.emplace_back("nnodes", topology.min_nodes == topology.max_nodes
                                  ? std::to_string(topology.min_nodes)
                                  : std::to_string(topology.min_nodes) + ":" + std::to_string(topology.max_nodes));
  rows.emplace_back("nproc_per_node", std::to_string(topology.nproc_per_node));
  if (facts.device_source) rows.emplace_back("gpus", *facts.device_source);
  rows.emplace_back("node_rank", std::to_string(topology.node_rank));
  rows.emplace_back("run_id", config.rdzv_id);
  rows.emplace_back("rdzv_backend", std::string(backend_name(config.rdzv_backend)));
  // torchrun: a static rendezvous without an endpoint meets at the master address and port.
  rows.emplace_back("rdzv_endpoint", config.rdzv_endpoint ? rendezvous::format_endpoint(config.rdzv_endpoint->host,
                                                                                        config.rdzv_endpoint->port)
                                     : config.rdzv_backend == RdzvBackend::static_
                                         ? rendezvous::format_endpoint(config.master_addr, config.master_port)
                                         : "(none)");
  rows.emplace_back("rdzv_configs", join_conf(config.rdzv_conf.given));
  rows.emplace_back("max_restarts", std::to_string(config.max_restarts));
  rows.emplace_back("master", facts.master.empty() ? "decided each round" : facts.master);
  rows.emplace_back("log_dir", facts.log_dir);
  rows.emplace_back("forward_signals", signal_list(config.signals_to_forward));

  std::size_t width = 0;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  std::vector<std::string> lines = {"launch config:"};
  for (const auto& [key, value] : rows) lines.push_back("  " + key + std::string(width - key.size(), ' ') + " : " + value);
  return lines;
}

std::string describe_attempt_start(int attempt, int restart_count, int max_restarts, int workers) {
  std::string line = "attempt " + std::to_string(attempt) + ": starting " + std::to_string(workers) +
                     (workers == 1 ? " worker" : " workers");
  if (restart_count > 0) line += " (restart " + std::to_string(restart_count) + " of " + std::to_string(max_restarts) + ")";
  return line;
}

std::string describe_worker_start(int local_rank, int rank, pid_t pid, const std::vector<std::string>& argv) {
  return "started local rank " + std::to_string(local_rank) + " (rank " + std::to_string(rank) + "), pid " +
         std::to_string(pid) + ": " + quote_command(argv);
}

}  // namespace ddprun::launcher

#include "launcher/observe/status_render.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "launcher/base/terminal_safe.hpp"
#include "launcher/output/live_region.hpp"
#include "launcher/observe/straggler_rule.hpp"

namespace ddprun::launcher {
namespace {

constexpr const char* kBold = "\x1b[1m";
constexpr const char* kRed = "\x1b[31m";
constexpr const char* kYellow = "\x1b[33m";
constexpr const char* kReset = "\x1b[0m";

/// Ranks listed one by one in the summary line up to this many; past it, min, median and max.
constexpr std::size_t kStepsListed = 16;

bool worth_seeing_first(const RankStatus& rank) {
  return rank.state == RankState::failed || rank.state == RankState::stopped || rank.straggler;
}

/// "3 running, 1 straggler, 1 failed": the count of each state present, in a fixed order.
std::string state_counts(const NodeStatus& node) {
  int stragglers = 0;
  int counts[5] = {};
  for (const RankStatus& rank : node.ranks) {
    if (rank.state == RankState::running && rank.straggler) {
      ++stragglers;
    } else {
      ++counts[static_cast<int>(rank.state)];
    }
  }
  std::string text;
  auto add = [&](int count, const char* word) {
    if (count == 0) return;
    if (!text.empty()) text += ", ";
    text += fmt::format("{} {}", count, word);
  };
  add(counts[static_cast<int>(RankState::starting)], "starting");
  add(counts[static_cast<int>(RankState::running)], "running");
  add(stragglers, stragglers == 1 ? "straggler" : "stragglers");
  add(counts[static_cast<int>(RankState::exited)], "exited");
  add(counts[static_cast<int>(RankState::failed)], "failed");
  add(counts[static_cast<int>(RankState::stopped)], "stopped");
  return text.empty() ? "no ranks" : text;
}

double node_samples_per_second(const NodeStatus& node, bool* any) {
  double total = 0;
  *any = false;
  for (const RankStatus& rank : node.ranks) {
    if (rank.progress && rank.state == RankState::running) {
      total += rank.progress->samples_per_second;
      *any = true;
    }
  }
  return total;
}

std::string rank_line(const RankStatus& rank, bool color) {
  std::string state = shown_state(rank);
  std::string step = rank.progress ? std::to_string(rank.progress->step) : "-";
  std::string rate = rank.progress ? format_count(rank.progress->samples_per_second) : "-";
  // The worker's own text: shown, never obeyed (a colour code in it would last past its cell, a
  // cursor move or a line break would break the block).
  std::string text = rank.progress ? terminal_safe_line(rank.progress->text) : std::string();
  if (rank.state == RankState::failed || rank.state == RankState::exited) {
    std::string code = rank.exitcode < 0 ? fmt::format("signal {}", -rank.exitcode) : fmt::format("exitcode {}", rank.exitcode);
    text = text.empty() ? code : code + "; " + text;
  }
  const bool live = rank.state == RankState::running || rank.state == RankState::starting;
  std::string line = fmt::format("{:>4} {:<10} {:>8} {:>10} {:>5} {:>7} {:>5}  {}", rank.rank, state, step, rate,
                                 live ? fmt::format("{:.0f}%", rank.cpu_percent) : "-",
                                 live ? format_bytes(rank.rss_bytes) : "-", format_age(rank.output_age_seconds), text);
  if (!color) return line;
  if (rank.state == RankState::failed) return kRed + line + kReset;
  if (rank.straggler && rank.state == RankState::running) return kYellow + line + kReset;
  return line;
}

}  // namespace

std::string format_count(double value) {
  if (value < 0 || std::isnan(value)) return "-";
  if (value < 1000) return fmt::format("{:.0f}", value);
  if (value < 10'000) return fmt::format("{:.1f}k", value / 1e3);
  if (value < 1'000'000) return fmt::format("{:.0f}k", value / 1e3);
  if (value < 10'000'000) return fmt::format("{:.1f}M", value / 1e6);
  if (value < 1e9) return fmt::format("{:.0f}M", value / 1e6);
  return fmt::format("{:.1f}G", value / 1e9);
}

std::string format_bytes(std::uint64_t bytes) {
  const double value = static_cast<double>(bytes);
  if (bytes < 1024) return fmt::format("{}B", bytes);
  if (bytes < 1024ull * 1024) return fmt::format("{:.1f}K", value / 1024);
  if (bytes < 1024ull * 1024 * 1024) return fmt::format("{:.1f}M", value / (1024.0 * 1024));
  return fmt::format("{:.1f}G", value / (1024.0 * 1024 * 1024));
}

std::string format_age(double seconds) {
  if (seconds < 0 || std::isnan(seconds)) return "-";
  if (seconds < 60) return fmt::format("{:.0f}s", std::floor(seconds));
  if (seconds < 3600) return fmt::format("{:.0f}m", std::floor(seconds / 60));
  return fmt::format("{:.0f}h", std::floor(seconds / 3600));
}

std::string shown_state(const RankStatus& rank) {
  if (rank.state == RankState::running && rank.straggler) return "straggler";
  return rank_state_name(rank.state);
}

std::vector<std::string> render_status_block(const NodeStatus& node, std::size_t columns, std::size_t max_rows,
                                             bool color) {
  max_rows = std::max<std::size_t>(max_rows, 3);
  const std::size_t width = columns > 1 ? columns - 1 : 1;
  std::vector<std::string> lines;
  bool any_rate = false;
  const double rate = node_samples_per_second(node, &any_rate);
  std::string title = fmt::format("ddprun status, attempt {}: {} ranks, {}", node.attempt, node.ranks.size(), state_counts(node));
  if (any_rate) title += fmt::format("; {} samples/s", format_count(rate));
  if (node.restarts > 0) title += fmt::format("; {} restarts", node.restarts);
  lines.push_back(fit_to_width(color ? kBold + title + kReset : title, width));
  lines.push_back(fit_to_width(fmt::format("{:>4} {:<10} {:>8} {:>10} {:>5} {:>7} {:>5}  {}", "rank", "state", "step",
                                           "samples/s", "cpu%", "rss", "out", "text"),
                               width));

  // Which ranks get a line: all when they fit, else those worth seeing first, then the lowest.
  std::vector<std::size_t> shown;
  const std::size_t room = max_rows - 2;
  if (node.ranks.size() <= room) {
    for (std::size_t i = 0; i < node.ranks.size(); ++i) shown.push_back(i);
  } else {
    const std::size_t keep = room - 1;  // the last row says how many more
    for (std::size_t i = 0; i < node.ranks.size() && shown.size() < keep; ++i) {
      if (worth_seeing_first(node.ranks[i])) shown.push_back(i);
    }
    for (std::size_t i = 0; i < node.ranks.size() && shown.size() < keep; ++i) {
      if (!worth_seeing_first(node.ranks[i])) shown.push_back(i);
    }
    std::sort(shown.begin(), shown.end());
  }
  for (std::size_t i : shown) lines.push_back(fit_to_width(rank_line(node.ranks[i], color), width));
  if (shown.size() < node.ranks.size()) {
    lines.push_back(fit_to_width(fmt::format("   ... {} more ranks", node.ranks.size() - shown.size()), width));
  }
  return lines;
}

std::string render_status_line(const NodeStatus& node) {
  std::string line = "status: " + state_counts(node);
  std::vector<const RankStatus*> reporting;
  for (const RankStatus& rank : node.ranks) {
    if (rank.progress) reporting.push_back(&rank);
  }
  if (!reporting.empty()) {
    line += "; step";
    if (node.ranks.size() <= kStepsListed) {
      for (const RankStatus& rank : node.ranks) {
        line += fmt::format(" {}:{}", rank.rank, rank.progress ? std::to_string(rank.progress->step) : "-");
      }
    } else {
      auto lowest = *std::min_element(reporting.begin(), reporting.end(),
                                      [](auto* a, auto* b) { return a->progress->step < b->progress->step; });
      auto highest = *std::max_element(reporting.begin(), reporting.end(),
                                        [](auto* a, auto* b) { return a->progress->step < b->progress->step; });
      std::vector<double> steps;
      for (const RankStatus* rank : reporting) steps.push_back(static_cast<double>(rank->progress->step));
      line += fmt::format(" min {} (rank {}), median {:.0f}, max {} (rank {})", lowest->progress->step, lowest->rank,
                          median_of(steps), highest->progress->step, highest->rank);
    }
  }
  bool any_rate = false;
  const double rate = node_samples_per_second(node, &any_rate);
  if (any_rate) line += fmt::format("; {} samples/s", format_count(rate));
  double cpu = 0;
  std::uint64_t rss = 0;
  for (const RankStatus& rank : node.ranks) {
    if (rank.state != RankState::running && rank.state != RankState::starting) continue;
    cpu += rank.cpu_percent;
    rss += rank.rss_bytes;
  }
  line += fmt::format("; cpu {:.0f}%; rss {}", cpu, format_bytes(rss));
  std::string stragglers;
  for (const RankStatus& rank : node.ranks) {
    if (rank.straggler && rank.state == RankState::running) stragglers += (stragglers.empty() ? "" : ",") + std::to_string(rank.rank);
  }
  if (!stragglers.empty()) line += "; stragglers: " + stragglers;
  return line;
}

}  // namespace ddprun::launcher

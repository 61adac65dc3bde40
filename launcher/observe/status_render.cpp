#include "launcher/observe/status_render.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

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

/// The gpu column's width: the widest cell, at least that of a plain one ("97% 61/80G 71C"), so that
/// the columns after it move only when a flag appears, and at most kGpuCellMax (a longer cell is cut).
constexpr std::size_t kGpuCellMin = 14;
constexpr std::size_t kGpuCellMax = 30;

bool gpu_problem(const RankStatus& rank) {
  const RankGpu* gpu = shown_gpu(rank);
  return gpu != nullptr && !gpu->problem.empty();
}

bool worth_seeing_first(const RankStatus& rank) {
  return rank.state == RankState::failed || rank.state == RankState::stopped || rank.straggler ||
         rank.gpu_straggler || gpu_problem(rank);
}

/// Memory in GiB for the gpu cell: "0", "0.5", "9.6", "61", "80".
std::string gib(std::uint64_t bytes) {
  if (bytes == 0) return "0";
  const double value = static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
  return value < 9.95 ? fmt::format("{:.1f}", value) : fmt::format("{:.0f}", value);
}

/// "3 running, 1 straggler, 1 failed": the count of each state present, in a fixed order.
std::string state_counts(const NodeStatus& node) {
  int stragglers = 0;
  int gpu_stragglers = 0;
  int counts[5] = {};
  for (const RankStatus& rank : node.ranks) {
    if (rank.state == RankState::running && rank.straggler) {
      ++stragglers;
    } else if (rank.state == RankState::running && rank.gpu_straggler) {
      ++gpu_stragglers;
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
  add(gpu_stragglers, gpu_stragglers == 1 ? "gpu straggler" : "gpu stragglers");
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

/// The block's column widths: the state's grows for "gpu straggler"; no gpu column (0) when no rank
/// has a GPU.
struct BlockWidths {
  std::size_t state = 10;
  std::size_t gpu = 0;
};

BlockWidths block_widths(const NodeStatus& node) {
  BlockWidths widths;
  for (const RankStatus& rank : node.ranks) {
    widths.state = std::max(widths.state, shown_state(rank).size());
    if (!rank.gpus.empty()) widths.gpu = std::max({widths.gpu, kGpuCellMin, gpu_cell(rank).size()});
  }
  widths.gpu = std::min(widths.gpu, kGpuCellMax);
  return widths;
}

/// The columns from rank to out, the text after them: the header's and a rank's line alike.
std::string block_line(const BlockWidths& widths, const std::string& rank, const std::string& state,
                       const std::string& step, const std::string& rate, const std::string& cpu,
                       const std::string& rss, const std::string& gpu, const std::string& out,
                       const std::string& text) {
  std::string line = fmt::format("{:>4} {:<{}} {:>8} {:>10} {:>5} {:>7}", rank, state, widths.state, step, rate, cpu, rss);
  if (widths.gpu > 0) line += fmt::format("  {:<{}}", fit_to_width(gpu, widths.gpu), widths.gpu);
  return line + fmt::format(" {:>5}  {}", out, text);
}

std::string rank_line(const RankStatus& rank, const BlockWidths& widths, bool color) {
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
  std::string line = block_line(widths, std::to_string(rank.rank), state, step, rate,
                                live ? fmt::format("{:.0f}%", rank.cpu_percent) : "-",
                                live ? format_bytes(rank.rss_bytes) : "-", gpu_cell(rank),
                                format_age(rank.output_age_seconds), text);
  if (!color) return line;
  if (rank.state == RankState::failed) return kRed + line + kReset;
  if ((rank.straggler || rank.gpu_straggler) && rank.state == RankState::running) return kYellow + line + kReset;
  return line;
}

/// A figure of each rank for the status line, "; LABEL 0:1204 1:1199 2:-" (nothing known: "-"), or
/// past kStepsListed ranks "; LABEL min 3 (rank 7), median 110, max 119 (rank 19)" of the known
/// ones ("; LABEL -" when none is); "" for no rank. `unit` follows each value ("%").
std::string per_rank_figures(std::string_view label, const std::vector<std::pair<int, std::optional<double>>>& figures,
                             bool listed, std::string_view unit = "") {
  if (figures.empty()) return {};
  std::string text = fmt::format("; {}", label);
  if (listed) {
    for (const auto& [rank, value] : figures) {
      text += fmt::format(" {}:{}", rank, value ? fmt::format("{:.0f}{}", *value, unit) : "-");
    }
    return text;
  }
  std::vector<std::pair<int, double>> known;
  for (const auto& [rank, value] : figures) {
    if (value) known.emplace_back(rank, *value);
  }
  if (known.empty()) return text + " -";
  auto by_value = [](const auto& a, const auto& b) { return a.second < b.second; };
  const auto lowest = *std::min_element(known.begin(), known.end(), by_value);
  const auto highest = *std::max_element(known.begin(), known.end(), by_value);
  std::vector<double> values;
  for (const auto& entry : known) values.push_back(entry.second);
  return text + fmt::format(" min {:.0f}{} (rank {}), median {:.0f}{}, max {:.0f}{} (rank {})", lowest.second, unit,
                            lowest.first, median_of(values), unit, highest.second, unit, highest.first);
}

/// The status line's GPU part, "" when no rank has a GPU: each rank's shown GPU utilisation (min,
/// median and max past kStepsListed ranks), the GPU stragglers, the ranks whose GPU has a problem,
/// and the node's gpu_note.
std::string gpu_summary(const NodeStatus& node) {
  std::vector<std::pair<int, std::optional<double>>> utilisation;
  for (const RankStatus& rank : node.ranks) {
    const RankGpu* gpu = shown_gpu(rank);
    if (gpu == nullptr) continue;
    const bool known = gpu->problem.empty() && gpu->utilisation_percent.has_value();
    utilisation.emplace_back(rank.rank, known ? std::optional<double>(*gpu->utilisation_percent) : std::nullopt);
  }
  std::string text = per_rank_figures("gpu", utilisation, node.ranks.size() <= kStepsListed, "%");
  std::string stragglers;
  std::string problems;
  for (const RankStatus& rank : node.ranks) {
    if (rank.gpu_straggler && rank.state == RankState::running) {
      stragglers += (stragglers.empty() ? "" : ",") + std::to_string(rank.rank);
    }
    if (gpu_problem(rank)) {
      problems += (problems.empty() ? "" : ",") + std::to_string(rank.rank) + ":" + gpu_problem_word(shown_gpu(rank)->problem);
    }
  }
  if (!stragglers.empty()) text += "; gpu stragglers: " + stragglers;
  if (!problems.empty()) text += "; gpu problems: " + problems;
  if (!node.gpu_note.empty()) text += "; gpu: " + terminal_safe_line(node.gpu_note);
  return text;
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
  if (rank.state == RankState::running && rank.gpu_straggler) return "gpu straggler";
  return rank_state_name(rank.state);
}

const RankGpu* shown_gpu(const RankStatus& rank) {
  if (rank.gpus.empty()) return nullptr;
  const bool holds_any = std::any_of(rank.gpus.begin(), rank.gpus.end(),
                                     [](const RankGpu& gpu) { return gpu.own_memory_bytes.value_or(0) > 0; });
  const RankGpu* first = nullptr;
  for (const RankGpu& gpu : rank.gpus) {
    if (holds_any && gpu.own_memory_bytes.value_or(0) == 0) continue;
    if (!gpu.problem.empty()) return &gpu;
    if (first == nullptr) first = &gpu;
  }
  return first;
}

std::string gpu_problem_word(const std::string& problem) {
  // gpu_state.cpp's reasons name NVML's code where there is one; the others by their words.
  const std::pair<const char*, const char*> words[] = {{"GPU_IS_LOST", "LOST"},
                                                       {"RESET_REQUIRED", "RESET"},
                                                       {"retired memory pages", "RETIRED"},
                                                       {"ECC", "ECC"},
                                                       {"remapping", "REMAP"}};
  for (const auto& [needle, word] : words) {
    if (problem.find(needle) != std::string::npos) return word;
  }
  return "UNHEALTHY";
}

std::string gpu_cell(const RankStatus& rank) {
  const RankGpu* gpu = shown_gpu(rank);
  if (gpu == nullptr) return {};
  std::string cell;
  if (!gpu->problem.empty()) {
    cell = gpu_problem_word(gpu->problem);
  } else {
    auto part = [](const auto& value, auto show) { return value ? show(*value) : std::string("-"); };
    cell = part(gpu->utilisation_percent, [](unsigned int v) { return fmt::format("{}%", v); });
    if (gpu->memory_used_bytes || gpu->memory_total_bytes) {
      cell += " " + part(gpu->memory_used_bytes, gib) + "/" + part(gpu->memory_total_bytes, gib) + "G";
    } else {
      cell += " -";
    }
    cell += " " + part(gpu->temperature_c, [](unsigned int v) { return fmt::format("{}C", v); });
    if (!gpu->throttle.empty()) cell += " thr";
    if (gpu->xid_count > 0) cell += " xid" + (gpu->xids.empty() ? std::string() : std::to_string(gpu->xids.back()));
  }
  if (rank.gpus.size() > 1) cell += fmt::format(" +{}", rank.gpus.size() - 1);
  return cell;
}

std::vector<std::string> render_status_block(const NodeStatus& node, std::size_t columns, std::size_t max_rows,
                                             bool color) {
  const bool note = !node.gpu_note.empty();
  max_rows = std::max<std::size_t>(max_rows, note ? 4 : 3);
  const std::size_t width = columns > 1 ? columns - 1 : 1;
  const BlockWidths widths = block_widths(node);
  std::vector<std::string> lines;
  bool any_rate = false;
  const double rate = node_samples_per_second(node, &any_rate);
  std::string title = fmt::format("ddprun status, attempt {}: {} ranks, {}", node.attempt, node.ranks.size(), state_counts(node));
  if (any_rate) title += fmt::format("; {} samples/s", format_count(rate));
  if (node.restarts > 0) title += fmt::format("; {} restarts", node.restarts);
  lines.push_back(fit_to_width(color ? kBold + title + kReset : title, width));
  lines.push_back(fit_to_width(
      block_line(widths, "rank", "state", "step", "samples/s", "cpu%", "rss", "gpu", "out", "text"), width));

  // Which ranks get a line: all when they fit, else those worth seeing first, then the lowest.
  std::vector<std::size_t> shown;
  const std::size_t room = max_rows - 2 - (note ? 1 : 0);
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
  for (std::size_t i : shown) lines.push_back(fit_to_width(rank_line(node.ranks[i], widths, color), width));
  if (shown.size() < node.ranks.size()) {
    lines.push_back(fit_to_width(fmt::format("   ... {} more ranks", node.ranks.size() - shown.size()), width));
  }
  if (note) {
    // Why the gpu column is missing or old: a stalled driver must not pass for an idle GPU.
    const std::string line = "gpu: " + terminal_safe_line(node.gpu_note);
    lines.push_back(fit_to_width(color ? kYellow + line + kReset : line, width));
  }
  return lines;
}

std::string render_status_line(const NodeStatus& node) {
  std::string line = "status: " + state_counts(node);
  std::vector<std::pair<int, std::optional<double>>> steps;
  bool any_step = false;
  for (const RankStatus& rank : node.ranks) {
    steps.emplace_back(rank.rank, rank.progress ? std::optional<double>(static_cast<double>(rank.progress->step)) : std::nullopt);
    any_step = any_step || rank.progress.has_value();
  }
  if (any_step) line += per_rank_figures("step", steps, node.ranks.size() <= kStepsListed);
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
  line += gpu_summary(node);
  return line;
}

}  // namespace ddprun::launcher

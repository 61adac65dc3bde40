#include "launcher/observe/status_table.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "launcher/gpu/gpu_state.hpp"
#include "launcher/observe/status_render.hpp"
#include "launcher/base/terminal_safe.hpp"

namespace ddprun::launcher {
namespace {

/// "warm (--preload): 4 interpreters, 3 ready, 1 importing; pids 101 102 103 104"
std::string describe_warm(const std::vector<WarmInterpreter>& warm) {
  const auto ready = std::count_if(warm.begin(), warm.end(), [](const WarmInterpreter& w) { return w.ready; });
  std::string pids;
  for (const auto& interpreter : warm) pids += " " + std::to_string(interpreter.pid);
  return "warm (--preload): " + std::to_string(warm.size()) + (warm.size() == 1 ? " interpreter, " : " interpreters, ") +
         std::to_string(ready) + " ready, " + std::to_string(static_cast<long>(warm.size()) - ready) + " importing; pids" + pids;
}

/// `text` on one line: terminal_safe, and line breaks shown as spaces.
std::string number(double value, const char* format) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

struct Row {
  std::vector<std::string> cells;
};

/// The lines under the table: each unhealthy GPU of a node once (several ranks may see it), with
/// its whole reason, then the node's gpu_note. Both are a node's text: made terminal-safe.
std::string gpu_lines(const std::vector<NodeStatus>& nodes) {
  std::string out;
  for (const auto& node : nodes) {
    std::set<unsigned int> said;
    for (const auto& rank : node.ranks) {
      for (const auto& gpu : rank.gpus) {
        if (gpu.problem.empty() || !said.insert(gpu.index).second) continue;
        out += "node " + std::to_string(node.node_rank) + ": " +
               terminal_safe_line(describe_gpu(gpu.index, gpu.uuid, gpu.bus_id) + " " + gpu.problem) + "\n";
      }
    }
  }
  for (const auto& node : nodes) {
    if (!node.gpu_note.empty()) out += "node " + std::to_string(node.node_rank) + ": gpu: " + terminal_safe_line(node.gpu_note) + "\n";
  }
  return out;
}

/// Columns padded to their widest cell: right-aligned but for those named in `left`; the last
/// column is not padded.
std::string layout(const std::vector<Row>& rows, const std::vector<bool>& left) {
  std::vector<std::size_t> width(left.size(), 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.cells.size(); ++i) width[i] = std::max(width[i], row.cells[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.cells.size(); ++i) {
      const std::string& cell = row.cells[i];
      const bool last = i + 1 == row.cells.size();
      const std::string pad(width[i] - cell.size(), ' ');
      if (i > 0) line += "  ";
      line += left[i] ? cell + (last ? "" : pad) : pad + cell;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string format_status_table(const JobStatus& job, double now, const std::string& title) {
  int restarts = 0;
  int hangs = 0;
  std::size_t rank_count = 0;
  for (const auto& node : job.nodes) {
    restarts = std::max(restarts, node.restarts);
    hangs += node.hangs;
    rank_count += node.ranks.size();
  }
  std::string out = terminal_safe_line(title) + ": world size " + std::to_string(job.world_size) + ", " +
                    std::to_string(job.nodes.size()) + (job.nodes.size() == 1 ? " node" : " nodes") + "; restarts " +
                    std::to_string(restarts) + ", hangs " + std::to_string(hangs) + "\n";
  for (const auto& node : job.nodes) {
    std::string sampled = node.sampled_at > 0 ? ", sampled " + format_age(std::max(0.0, now - node.sampled_at)) + " ago"
                                              : ", not sampled yet";
    out += "node " + std::to_string(node.node_rank) + " (" + terminal_safe_line(node.host) + "): attempt " +
           std::to_string(node.attempt) + sampled + "\n";
    if (!node.warm.empty()) out += "  " + describe_warm(node.warm) + "\n";
  }
  if (rank_count == 0) return out + "no workers running\n";

  std::vector<std::pair<const NodeStatus*, const RankStatus*>> ranks;
  bool gpus = false;
  for (const auto& node : job.nodes) {
    for (const auto& rank : node.ranks) {
      ranks.emplace_back(&node, &rank);
      gpus = gpus || !rank.gpus.empty();
    }
  }
  // The gpu column (after rss) only when some rank has a GPU: a job on CPUs looks as it did.
  constexpr std::size_t kGpuColumn = 9;
  std::vector<Row> rows;
  rows.push_back({{"rank", "node", "local", "pid", "state", "step", "samples/s", "cpu%", "rss", "out", "text"}});
  std::vector<bool> left{false, false, false, false, true, false, false, false, false, false, true};
  if (gpus) {
    rows[0].cells.insert(rows[0].cells.begin() + kGpuColumn, "gpu");
    left.insert(left.begin() + kGpuColumn, true);
  }
  std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.second->rank < b.second->rank; });
  for (const auto& [node, rank] : ranks) {
    std::string state = shown_state(*rank);
    if (rank->state == RankState::exited || rank->state == RankState::failed) {
      state += " (" + std::to_string(rank->exitcode) + ")";
    }
    const auto& progress = rank->progress;
    rows.push_back({{std::to_string(rank->rank), std::to_string(node->node_rank), std::to_string(rank->local_rank),
                     std::to_string(rank->pid), state, progress ? std::to_string(progress->step) : "-",
                     progress ? format_count(progress->samples_per_second) : "-", number(rank->cpu_percent, "%.0f%%"),
                     format_bytes(rank->rss_bytes), format_age(rank->output_age_seconds),
                     progress ? terminal_safe_line(progress->text) : ""}});
    if (gpus) {
      const std::string cell = gpu_cell(*rank);
      rows.back().cells.insert(rows.back().cells.begin() + kGpuColumn, cell.empty() ? "-" : cell);
    }
  }
  return out + layout(rows, left) + gpu_lines(job.nodes);
}

std::string format_stacks(const std::vector<RankStacks>& ranks, const std::vector<std::string>& digest) {
  std::string out;
  for (const auto& line : digest) out += terminal_safe_line(line) + "\n";
  if (!digest.empty()) out += "\n";
  std::vector<const RankStacks*> ordered;
  for (const auto& rank : ranks) ordered.push_back(&rank);
  std::sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) { return a->rank < b->rank; });
  for (const RankStacks* rank : ordered) {
    out += "rank " + std::to_string(rank->rank) + " (pid " + std::to_string(rank->pid) + ", node " +
           std::to_string(rank->node_rank) + ")";
    if (!rank->file.empty()) out += " " + terminal_safe_line(rank->file);
    out += rank->error.empty() ? ":\n" : ": no stacks: " + terminal_safe_line(rank->error) + "\n";
    for (const auto& thread : rank->threads) {
      out += "  " + std::string(thread.python ? "Python " : "") + terminal_safe_line(thread.name) + "\n";
      for (const auto& frame : thread.frames) {
        out += "    " + terminal_safe_line(frame.function) + (frame.location.empty() ? "" : "  " + terminal_safe_line(frame.location)) + "\n";
      }
    }
  }
  if (ranks.empty() && digest.empty()) out += "no ranks to show\n";
  return out;
}

}  // namespace ddprun::launcher

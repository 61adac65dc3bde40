#include "launcher/report/oom_watch.hpp"

#include <fstream>
#include <utility>
#include <vector>

#include "common/integer.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

/// cgroup and proc files are a few hundred bytes; the bound only guards against a wrong path.
constexpr std::size_t kMaxControlFileBytes = 64 * 1024;

std::optional<std::string> read_small_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return std::nullopt;
  std::string text(kMaxControlFileBytes, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (file.bad()) return std::nullopt;
  text.resize(static_cast<std::size_t>(file.gcount()));
  return text;
}

std::optional<std::uint64_t> read_count(const fs::path& path) {
  auto text = read_small_file(path);
  return text ? parse_oom_kill_count(*text) : std::nullopt;
}

/// Calls `visit(line)` for each line until it returns true.
template <typename Visit>
void for_each_line(std::string_view text, Visit visit) {
  while (!text.empty()) {
    auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (visit(line)) return;
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
}

struct CgroupLine {
  std::string_view hierarchy_id;
  std::string_view controllers;
  std::string_view path;
};

/// "id:controllers:path"; the path may itself contain ':'.
std::optional<CgroupLine> split_cgroup_line(std::string_view line) {
  auto first = line.find(':');
  if (first == std::string_view::npos) return std::nullopt;
  auto second = line.find(':', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  CgroupLine parts{line.substr(0, first), line.substr(first + 1, second - first - 1),
                   line.substr(second + 1)};
  if (!parts.path.starts_with('/')) return std::nullopt;
  return parts;
}

bool lists_controller(std::string_view controllers, std::string_view wanted) {
  while (true) {
    auto comma = controllers.find(',');
    if (controllers.substr(0, comma) == wanted) return true;
    if (comma == std::string_view::npos) return false;
    controllers.remove_prefix(comma + 1);
  }
}

/// `cgroup_path` ("/a/b") as a directory under a hierarchy's mount point.
fs::path under(const fs::path& mount, std::string_view cgroup_path) {
  return mount / fs::path(cgroup_path).relative_path();
}

}  // namespace

std::optional<std::uint64_t> parse_oom_kill_count(std::string_view memory_events_text) {
  std::optional<std::uint64_t> count;
  for_each_line(memory_events_text, [&](std::string_view line) {
    constexpr std::string_view kKey = "oom_kill ";  // the space keeps out oom_kill_disable
    if (!line.starts_with(kKey)) return false;
    line.remove_prefix(kKey.size());
    if (auto value = common::parse_integer<std::uint64_t>(line)) count = value;
    return true;
  });
  return count;
}

std::optional<std::string> parse_cgroup_v2_path(std::string_view proc_self_cgroup_text) {
  std::optional<std::string> path;
  for_each_line(proc_self_cgroup_text, [&](std::string_view line) {
    auto parts = split_cgroup_line(line);
    if (!parts || parts->hierarchy_id != "0" || !parts->controllers.empty()) return false;
    path = std::string(parts->path);
    return true;
  });
  return path;
}

std::optional<std::string> parse_cgroup_v1_memory_path(std::string_view proc_self_cgroup_text) {
  std::optional<std::string> path;
  for_each_line(proc_self_cgroup_text, [&](std::string_view line) {
    auto parts = split_cgroup_line(line);
    if (!parts || parts->hierarchy_id == "0" || !lists_controller(parts->controllers, "memory")) return false;
    path = std::string(parts->path);
    return true;
  });
  return path;
}

OomWatch::OomWatch(std::filesystem::path counter_file) : counter_file_(std::move(counter_file)) {}

OomWatch OomWatch::for_this_process(const std::filesystem::path& proc_self_cgroup,
                                    const std::filesystem::path& cgroup_root) {
  auto membership = read_small_file(proc_self_cgroup);
  if (!membership) return {};

  std::vector<fs::path> candidates;
  if (auto v2 = parse_cgroup_v2_path(*membership)) {
    for (fs::path dir = fs::path(*v2).lexically_normal();; dir = dir.parent_path()) {
      candidates.push_back(under(cgroup_root, dir.native()) / "memory.events");
      if (dir == dir.parent_path()) break;
    }
  }
  if (auto v1 = parse_cgroup_v1_memory_path(*membership)) {
    // Without a cgroup namespace a container mounts some ancestor of its cgroup as the root, so
    // the host's path ("/outer/job/sub") appears here with leading parts missing ("/sub"): try
    // the whole path, then drop leading parts, down to the mount root. v1 counts a kill only in
    // the victim's own cgroup, so the deepest match is the one that counts.
    const fs::path mount = cgroup_root / "memory";
    std::string_view rest = *v1;
    while (true) {
      candidates.push_back(under(mount, rest) / "memory.oom_control");
      auto next = rest.find('/', 1);
      if (rest.size() <= 1) break;
      rest = next == std::string_view::npos ? std::string_view("/") : rest.substr(next);
    }
  }

  for (const auto& candidate : candidates) {
    if (read_count(candidate)) return OomWatch(candidate);
  }
  return {};
}

bool OomWatch::available() const { return !counter_file_.empty(); }

std::optional<std::uint64_t> OomWatch::read_kills() const {
  if (!available()) return std::nullopt;
  return read_count(counter_file_);
}

const std::filesystem::path& OomWatch::counter_file() const { return counter_file_; }

}  // namespace ddprun::launcher

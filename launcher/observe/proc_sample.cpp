#include "launcher/observe/proc_sample.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace ddprun::launcher {
namespace {

/// The next space-separated token of `text`, or empty at the end.
std::string_view next_token(std::string_view& text) {
  std::size_t start = text.find_first_not_of(" \n\t");
  if (start == std::string_view::npos) {
    text = {};
    return {};
  }
  text.remove_prefix(start);
  std::size_t end = text.find_first_of(" \n\t");
  std::string_view token = text.substr(0, end);
  text.remove_prefix(end == std::string_view::npos ? text.size() : end);
  return token;
}

template <class T>
bool to_integer(std::string_view token, T& value) {
  if (token.empty()) return false;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  return ec == std::errc() && end == token.data() + token.size();
}

/// Reads a small /proc file from its start into `buffer` through `fd`; the bytes read, or nothing
/// when it cannot (ESRCH: the process is gone). /proc gives a small file whole to one read that has
/// room for it: read again only when full.
std::optional<std::string_view> read_at_start(int fd, std::array<char, 4096>& buffer) {
  std::size_t total = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buffer.data() + total, buffer.size() - total, static_cast<off_t>(total));
    if (n < 0) return std::nullopt;
    const std::size_t room = buffer.size() - total;
    total += static_cast<std::size_t>(n);
    if (n == 0 || static_cast<std::size_t>(n) < room || total == buffer.size()) break;
  }
  return std::string_view(buffer.data(), total);
}

int open_proc_file(const std::string& path) { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); }

/// Opens, reads and closes `path`.
std::optional<std::string_view> read_small(const std::string& path, std::array<char, 4096>& buffer) {
  UniqueFd fd(open_proc_file(path));
  if (fd.get() < 0) return std::nullopt;
  return read_at_start(fd.get(), buffer);
}

}  // namespace

std::optional<ProcStat> parse_proc_stat(std::string_view text) {
  std::size_t open = text.find('(');
  std::size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
  ProcStat stat;
  std::string_view head = text.substr(0, open);
  if (!to_integer(next_token(head), stat.pid)) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  // Fields 3.. of proc(5), numbered from 0 here: field n is index n - 3.
  std::array<std::string_view, 22> fields{};
  for (auto& field : fields) {
    field = next_token(rest);
    if (field.empty()) return std::nullopt;
  }
  if (fields[0].size() != 1) return std::nullopt;
  stat.state = fields[0][0];
  bool ok = to_integer(fields[1], stat.ppid) && to_integer(fields[11], stat.utime) && to_integer(fields[12], stat.stime);
  // cutime and cstime are signed in the kernel; never negative in practice.
  long long cutime = 0;
  long long cstime = 0;
  ok = ok && to_integer(fields[13], cutime) && to_integer(fields[14], cstime) && to_integer(fields[19], stat.starttime);
  long long rss = 0;
  ok = ok && to_integer(fields[21], rss);
  if (!ok) return std::nullopt;
  stat.cutime = static_cast<std::uint64_t>(std::max(cutime, 0LL));
  stat.cstime = static_cast<std::uint64_t>(std::max(cstime, 0LL));
  stat.rss_pages = static_cast<std::uint64_t>(std::max(rss, 0LL));
  return stat;
}

std::vector<pid_t> parse_children(std::string_view text) {
  std::vector<pid_t> pids;
  for (std::string_view token = next_token(text); !token.empty(); token = next_token(text)) {
    pid_t pid = 0;
    if (to_integer(token, pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

ProcessTree::ProcessTree(pid_t root, std::string proc_root)
    : root_(root), proc_root_(std::move(proc_root)), page_size_(static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE))) {}

std::optional<ProcStat> ProcessTree::read_stat(pid_t pid) {
  std::array<char, 4096> buffer;
  const std::string path = proc_root_ + "/" + std::to_string(pid) + "/stat";
  std::optional<std::string_view> text;
  if (pid == root_) {
    // The root's file stays open: one pread a sample instead of open, read and close. The open file
    // is the process's own, so a reused pid never reads as it (the read fails once it is gone).
    if (root_stat_.get() < 0) root_stat_ = UniqueFd(open_proc_file(path));
    if (root_stat_.get() >= 0) text = read_at_start(root_stat_.get(), buffer);
  } else {
    text = read_small(path, buffer);
  }
  return text ? parse_proc_stat(*text) : std::nullopt;
}

std::vector<pid_t> ProcessTree::read_children(pid_t pid, pid_t tid) {
  std::array<char, 4096> buffer;
  const std::string path = proc_root_ + "/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/children";
  std::optional<std::string_view> text;
  if (pid == root_ && tid == root_) {
    if (root_children_.get() < 0) root_children_ = UniqueFd(open_proc_file(path));
    if (root_children_.get() >= 0) text = read_at_start(root_children_.get(), buffer);
  } else {
    text = read_small(path, buffer);
  }
  return text ? parse_children(*text) : std::vector<pid_t>{};
}

std::vector<pid_t> ProcessTree::read_threads(pid_t pid) const {
  std::vector<pid_t> tids;
  DIR* dir = ::opendir((proc_root_ + "/" + std::to_string(pid) + "/task").c_str());
  if (dir == nullptr) return tids;
  while (dirent* entry = ::readdir(dir)) {
    pid_t tid = 0;
    if (to_integer(std::string_view(entry->d_name), tid) && tid > 0) tids.push_back(tid);
  }
  ::closedir(dir);
  return tids;
}

std::optional<TreeSample> ProcessTree::sample() {
  const bool full_scan = samples_++ % kFullScanEvery == 0;
  TreeSample sample;
  std::vector<pid_t> seen;
  std::vector<pid_t> todo;           // from main threads' children lists
  std::vector<pid_t> todo_off_main;  // from other threads' lists (full scans only)
  std::vector<Known> off_main;       // kept for the samples between full scans
  auto visit = [&](pid_t pid, std::optional<std::uint64_t> expected_start, bool is_off_main) {
    if (std::find(seen.begin(), seen.end(), pid) != seen.end()) return false;
    auto stat = read_stat(pid);
    if (!stat || stat->state == 'Z' || stat->state == 'X') return false;
    if (expected_start && stat->starttime != *expected_start) return false;  // the pid was reused
    seen.push_back(pid);
    if (is_off_main) off_main.push_back({pid, stat->starttime});
    sample.cpu_ticks += stat->utime + stat->stime + stat->cutime + stat->cstime;
    sample.rss_bytes += stat->rss_pages * page_size_;
    ++sample.processes;
    for (pid_t child : read_children(pid, pid)) todo.push_back(child);
    if (full_scan) {
      for (pid_t tid : read_threads(pid)) {
        if (tid == pid) continue;
        for (pid_t child : read_children(pid, tid)) todo_off_main.push_back(child);
      }
    }
    return true;
  };
  auto drain = [&] {
    while (!todo.empty() || !todo_off_main.empty()) {
      if (!todo.empty()) {
        pid_t pid = todo.back();
        todo.pop_back();
        visit(pid, std::nullopt, false);
      } else {
        pid_t pid = todo_off_main.back();
        todo_off_main.pop_back();
        visit(pid, std::nullopt, true);
      }
    }
  };
  // A zombie root is a worker about to be reaped: its times are final, its children gone elsewhere.
  if (!visit(root_, std::nullopt, false)) return std::nullopt;
  drain();
  // Processes another thread forked, found by an earlier full scan: ours while the pid names the same process.
  for (const Known& known : off_main_) visit(known.pid, known.starttime, true);
  drain();
  off_main_ = std::move(off_main);
  sample.pids = std::move(seen);
  return sample;
}

}  // namespace ddprun::launcher

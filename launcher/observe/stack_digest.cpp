#include "launcher/observe/stack_digest.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <string_view>

#include "launcher/observe/stack_text.hpp"

namespace ddprun::launcher {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string_view base_name(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// "/usr/lib/python3.11/threading.py:975" is the interpreter's library; "/work/train.py:41" is not.
bool python_library(std::string_view location) {
  if (starts_with(location, "<")) return true;  // <frozen importlib._bootstrap>, <string>
  if (contains(location, "/site-packages/") || contains(location, "/dist-packages/")) return true;
  for (std::string_view lib : {"/lib/python3.", "/lib/python3/", "/lib/pypy"}) {
    if (contains(location, lib)) return true;
  }
  return false;
}

/// A native frame that says nothing about the program (see the header).
bool system_frame(const StackFrame& frame) {
  std::string_view f = frame.function;
  std::string_view where = frame.location;
  if (f == "??" || f.empty() || starts_with(f, "<signal handler")) return true;
  if (starts_with(f, "std::") || starts_with(f, "__gnu_cxx::") || starts_with(f, "__")) return true;
  if (starts_with(f, "_Py") || (starts_with(f, "Py") && f.size() > 2 && (std::isupper(static_cast<unsigned char>(f[2])) || f[2] == '_'))) {
    return true;
  }
  std::string_view object = base_name(where);
  for (std::string_view lib : {"libc.so", "libpthread", "ld-linux", "libstdc++", "libgcc_s", "libpython", "libm.so"}) {
    if (starts_with(object, lib)) return true;
  }
  // glibc's own sources (libc6-dbg): "./nptl/futex-internal.c:57", "../sysdeps/unix/...".
  if (starts_with(where, "./") || starts_with(where, "../")) return true;
  for (std::string_view name : {"start_thread", "clone", "clone3", "_start", "main_arg", "epoll_wait", "poll",
                                "select", "nanosleep", "clock_nanosleep", "syscall", "sleep", "usleep", "read", "write",
                                "recv", "recvmsg", "send", "sendmsg", "accept", "pthread_cond_wait",
                                "pthread_cond_timedwait", "pthread_cond_clockwait", "pthread_join", "sem_wait"}) {
    if (f == name) return true;
  }
  return false;
}

bool shared_object(std::string_view location) { return contains(location, ".so"); }

/// The thread that stands for the rank: Python's main thread (listed last), else the native one
/// whose LWP is the pid (else the first listed).
const ThreadStack* main_thread(const RankStacks& stacks) {
  const ThreadStack* python = nullptr;
  for (const auto& thread : stacks.threads) {
    if (thread.python && !thread.frames.empty()) python = &thread;
  }
  if (python) return python;
  const ThreadStack* first = nullptr;
  for (const auto& thread : stacks.threads) {
    if (thread.python) continue;
    if (!first) first = &thread;
    if (stacks.pid != 0 && gdb_thread_lwp(thread) == stacks.pid) return &thread;
  }
  return first;
}

std::string python_frame_text(const StackFrame& frame) {
  if (!python_library(frame.location)) return std::string(base_name(frame.location));
  return frame.function;
}

/// "a <- b <- c <- d", or "a <- b <- ... <- z" past four.
std::string chain(const std::vector<std::string>& parts) {
  std::vector<std::string> shown = parts;
  if (parts.size() > 4) shown = {parts[0], parts[1], "...", parts.back()};
  std::string text;
  for (const auto& part : shown) {
    if (!text.empty()) text += " <- ";
    text += part;
  }
  return text;
}

RankPlace python_place(const ThreadStack& thread, const SourceLineReader& source) {
  std::vector<std::string> parts;
  std::string key;
  for (std::size_t i = 0; i < thread.frames.size(); ++i) {
    const StackFrame& frame = thread.frames[i];
    if (!python_library(frame.location)) {
      if (i == 0 && source) {
        // Standing in its own code: the line says what it called (time.sleep(3600)).
        auto colon = frame.location.rfind(':');
        int line = 0;
        try {
          line = colon == std::string::npos ? 0 : std::stoi(frame.location.substr(colon + 1));
        } catch (const std::exception&) {
        }
        if (auto text = line > 0 ? source(frame.location.substr(0, colon), line) : std::nullopt; text && !text->empty()) {
          parts.push_back(text->size() > 60 ? text->substr(0, 57) + "..." : *text);
        }
      }
      parts.push_back(python_frame_text(frame));
      key = "py:" + frame.location;
      break;
    }
    parts.push_back(python_frame_text(frame));
  }
  if (key.empty()) key = "py:" + chain(parts);  // only library frames (a thread of the library's own)
  return {key, chain(parts)};
}

RankPlace native_place(const ThreadStack& thread) {
  std::vector<std::string> parts;
  std::string key;
  for (const StackFrame& frame : thread.frames) {
    if (system_frame(frame)) continue;
    std::string name = short_function_name(frame.function);
    if (name.empty() || starts_with(name, "std::")) continue;
    parts.push_back(name);
    if (key.empty() && !shared_object(frame.location)) key = "native:" + name + "@" + frame.location;
  }
  if (parts.empty()) {
    // Nothing but system frames: say the innermost, so that the rank still has a place.
    if (!thread.frames.empty()) parts.push_back(short_function_name(thread.frames.front().function));
  }
  if (key.empty()) key = "native:" + chain(parts);
  return {key, chain(parts)};
}

}  // namespace

std::string short_function_name(const std::string& name) {
  std::string text = name;
  for (std::string_view anonymous : {"(anonymous namespace)::"}) {
    for (auto at = text.find(anonymous); at != std::string::npos; at = text.find(anonymous)) {
      text.erase(at, anonymous.size());
    }
  }
  std::string out;
  int angle = 0;
  int paren = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (paren == 0 && angle == 0 && text.compare(i, 10, "operator()") == 0) {
      out += "operator()";
      i += 9;
      continue;
    }
    if (paren == 0 && c == '<' && text.compare(i, 2, "<<") != 0) {
      ++angle;
      continue;
    }
    if (paren == 0 && c == '>' && angle > 0) {
      --angle;
      continue;
    }
    if (c == '(') {
      ++paren;
      continue;
    }
    if (c == ')' && paren > 0) {
      --paren;
      continue;
    }
    if (angle == 0 && paren == 0) out += c;
  }
  return out;
}

RankPlace place_of(const RankStacks& stacks, const SourceLineReader& source) {
  const ThreadStack* thread = main_thread(stacks);
  if (!thread) {
    std::string why = stacks.error.empty() ? std::string("no frames") : stacks.error;
    return {"error:" + why, "no stacks (" + why + ")"};
  }
  return thread->python ? python_place(*thread, source) : native_place(*thread);
}

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string text;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!text.empty()) text += ",";
    if (j - i >= 2) {
      text += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
    } else {
      for (std::size_t k = i; k <= j; ++k) text += (k > i ? "," : "") + std::to_string(ranks[k]);
    }
    i = j + 1;
  }
  return text;
}

std::vector<std::string> stack_digest(const std::vector<RankStacks>& ranks, const SourceLineReader& source) {
  struct Group {
    std::string line;
    std::vector<int> ranks;
  };
  std::map<std::string, Group> groups;
  for (const RankStacks& stacks : ranks) {
    RankPlace place = place_of(stacks, source);
    Group& group = groups[place.key];
    if (group.ranks.empty()) group.line = place.line;
    group.ranks.push_back(stacks.rank);
  }
  std::vector<Group> ordered;
  for (auto& [key, group] : groups) {
    std::sort(group.ranks.begin(), group.ranks.end());
    ordered.push_back(std::move(group));
  }
  std::sort(ordered.begin(), ordered.end(), [](const Group& a, const Group& b) {
    if (a.ranks.size() != b.ranks.size()) return a.ranks.size() < b.ranks.size();
    return a.ranks.front() < b.ranks.front();
  });
  std::vector<std::string> lines;
  for (const Group& group : ordered) {
    lines.push_back((group.ranks.size() == 1 ? "rank " : "ranks ") + rank_list(group.ranks) + ": " + group.line);
  }
  return lines;
}

}  // namespace ddprun::launcher

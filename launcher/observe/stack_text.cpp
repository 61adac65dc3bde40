#include "launcher/observe/stack_text.hpp"

#include <cctype>
#include <optional>
#include <string>

#include "launcher/base/text.hpp"

namespace ddprun::launcher {
namespace {

/// The lines of `text`, without their '\n'.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    auto end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

/// `s` without its last balanced "(...)" group when it ends with one ("f(int) ()" -> "f(int)").
std::string_view strip_trailing_group(std::string_view s) {
  s = trim(s);
  if (s.empty() || s.back() != ')') return s;
  int depth = 0;
  for (std::size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) return i == 0 ? s : trim(s.substr(0, i));
  }
  return s;  // unbalanced: leave it as it is
}

/// gdb's function text without its argument list and, for a demangled C++ name, its parameters:
/// "c10d::Work::wait(std::chrono::duration<long> ) ()" -> "c10d::Work::wait".
std::string function_name(std::string_view text) {
  std::string_view name = strip_trailing_group(text);  // the call's arguments: "(...)", "()", "(a=1, b=2)"
  if (name.size() > 6 && name.substr(name.size() - 6) == " const") name.remove_suffix(6);
  if (!name.empty() && name.back() == ')' && !(name.size() >= 10 && name.substr(name.size() - 10) == "operator()")) {
    name = strip_trailing_group(name);  // a demangled name's parameter types
  }
  return name.empty() ? std::string("??") : std::string(name);
}

/// "#12 0x00007f.. in f (...) at x.c:5", "#1  f (...) from /lib/x.so", "#3  <signal handler called>".
std::optional<StackFrame> parse_gdb_frame(std::string_view line) {
  if (line.size() < 2 || line[0] != '#') return std::nullopt;
  std::size_t i = 1;
  while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  if (i == 1) return std::nullopt;
  std::string_view rest = trim(line.substr(i));
  if (starts_with(rest, "0x")) {
    auto in = rest.find(" in ");
    if (in == std::string_view::npos) return StackFrame{"??", ""};
    rest = trim(rest.substr(in + 4));
  }
  StackFrame frame;
  if (auto from = rest.rfind(" from "); from != std::string_view::npos) {
    frame.location = std::string(trim(rest.substr(from + 6)));
    rest = rest.substr(0, from);
  } else if (auto at = rest.rfind(" at "); at != std::string_view::npos) {
    std::string_view where = trim(rest.substr(at + 4));
    auto colon = where.rfind(':');
    if (colon != std::string_view::npos && all_digits(where.substr(colon + 1))) {
      frame.location = std::string(where);
      rest = rest.substr(0, at);
    }
  }
  frame.function = function_name(rest);
  return frame;
}

/// "Thread 6 (Thread 0x7f.. (LWP 4622) "python3"):" -> "Thread 6 (LWP 4622)".
std::optional<std::string> parse_gdb_thread_header(std::string_view line) {
  if (!starts_with(line, "Thread ") || line.empty() || line.back() != ':') return std::nullopt;
  std::string_view rest = line.substr(7);
  auto space = rest.find(' ');
  std::string_view number = rest.substr(0, space);
  if (!all_digits(number)) return std::nullopt;
  std::string name = "Thread " + std::string(number);
  for (std::string_view key : {"(LWP ", "(process "}) {
    auto at = line.find(key);
    if (at == std::string_view::npos) continue;
    std::string_view id = line.substr(at + key.size());
    id = id.substr(0, id.find(')'));
    if (all_digits(id)) return name + " (LWP " + std::string(id) + ")";
  }
  return name;
}

}  // namespace

std::vector<ThreadStack> parse_gdb_backtrace(std::string_view text) {
  std::vector<ThreadStack> threads;
  for (std::string_view line : lines_of(text)) {
    if (auto name = parse_gdb_thread_header(line)) {
      threads.push_back(ThreadStack{*name, false, {}});
      continue;
    }
    if (threads.empty()) continue;  // gdb's chatter and the current frame's line before the first thread
    if (auto frame = parse_gdb_frame(line)) threads.back().frames.push_back(std::move(*frame));
  }
  return threads;
}

std::vector<ThreadStack> parse_faulthandler(std::string_view text) {
  std::vector<ThreadStack> threads;
  for (std::string_view line : lines_of(text)) {
    std::string_view body = trim(line);
    const bool header = (starts_with(body, "Thread 0x") || starts_with(body, "Current thread 0x") ||
                         starts_with(body, "Stack")) &&
                        body.find("(most recent call first)") != std::string_view::npos;
    if (header) {
      std::string_view name = body.substr(0, body.find(" (most recent call first)"));
      if (starts_with(name, "Current thread ")) name.remove_prefix(8);  // "thread 0x.." -> keep "Thread 0x.."
      std::string named(name);
      if (!named.empty()) named[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(named[0])));
      threads.push_back(ThreadStack{named, true, {}});
      continue;
    }
    if (threads.empty() || !starts_with(body, "File \"")) continue;  // "<no Python frame>", "...", blank lines
    // File "PATH", line N in FUNC
    std::string_view rest = body.substr(6);
    auto quote = rest.find("\", line ");
    if (quote == std::string_view::npos) continue;
    std::string_view path = rest.substr(0, quote);
    rest.remove_prefix(quote + 8);
    auto in = rest.find(" in ");
    std::string_view number = rest.substr(0, in);
    std::string function = in == std::string_view::npos ? std::string("???") : std::string(trim(rest.substr(in + 4)));
    threads.back().frames.push_back(StackFrame{function, std::string(path) + ":" + std::string(number)});
  }
  return threads;
}

long gdb_thread_lwp(const ThreadStack& thread) {
  auto at = thread.name.find("(LWP ");
  if (at == std::string::npos) return 0;
  std::string id = thread.name.substr(at + 5);
  id = id.substr(0, id.find(')'));
  return all_digits(id) ? std::stol(id) : 0;
}

}  // namespace ddprun::launcher

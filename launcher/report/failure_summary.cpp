#include "launcher/report/failure_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <string_view>
#include <tuple>
#include <vector>

#include "launcher/base/signal_names.hpp"
#include "launcher/base/terminal_safe.hpp"

namespace ddprun::launcher {
namespace {

constexpr std::size_t kMaxRuleWidth = 60;  // torchrun's bound
constexpr std::string_view kNotAvailable = "<N/A>";
constexpr std::string_view kTracebackLink =
    "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html";
constexpr std::string_view kOomKilled = "killed by the kernel's OOM killer";
/// What the summary shows of one failure's traceback: its end, where the exception is.
constexpr std::size_t kMaxTracebackLines = 100;
constexpr std::size_t kMaxTracebackBytes = 16 * 1024;

std::int64_t failure_time_s(const WorkerFailure& failure) {
  if (failure.error && failure.error->timestamp_s) return *failure.error->timestamp_s;
  return std::chrono::floor<std::chrono::seconds>(failure.time.time_since_epoch()).count();
}

/// Python's datetime.fromtimestamp(ts).isoformat(sep="_") for whole seconds.
std::string local_time_text(std::int64_t epoch_s) {
  auto time = static_cast<std::time_t>(epoch_s);
  std::tm local{};
  if (::localtime_r(&time, &local) == nullptr) return std::string(kNotAvailable);
  return fmt::format("{:04}-{:02}-{:02}_{:02}:{:02}:{:02}", local.tm_year + 1900, local.tm_mon + 1,
                     local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec);
}

std::string_view trim_right(std::string_view text) {
  auto end = text.find_last_not_of(" \t\r\n");
  return end == std::string_view::npos ? std::string_view() : text.substr(0, end + 1);
}

/// Puts `indent` after every '\n', as torchrun does to keep a traceback inside its block.
std::string indent_continuation(std::string_view text, std::string_view indent) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += indent;
  }
  return out;
}

std::string error_text(const ErrorFileContent& error) {
  std::string traceback(trim_right(error.traceback));
  std::string_view message = trim_right(error.message);
  if (traceback.empty()) return std::string(message.empty() ? kNotAvailable : message);
  // Python's traceback already ends with the message; a C++ backtrace may not.
  if (!message.empty() && traceback.find(message) == std::string::npos) {
    traceback += '\n';
    traceback += message;
  }
  return traceback;
}

/// The module of the last "ModuleNotFoundError: No module named 'M'" in `text`, or "".
std::string missing_module(std::string_view text) {
  constexpr std::string_view marker = "ModuleNotFoundError: No module named '";
  auto at = text.rfind(marker);
  if (at == std::string_view::npos) return {};
  auto name = text.substr(at + marker.size());
  auto end = name.find('\'');
  if (end == std::string_view::npos || end == 0 || end > 200) return {};
  return std::string(name.substr(0, end));
}

/// One line for a Python worker that could not import a module: most often torch lives in
/// another interpreter than the one that ran the worker.
std::string module_hint(const WorkerFailure& failure) {
  if (failure.python.empty()) return {};
  std::string module = missing_module(failure.stderr_tail);
  if (module.empty() && failure.error) module = missing_module(failure.error->message + "\n" + failure.error->traceback);
  if (module.empty()) return {};
  return fmt::format(
      "(ddprun) no module named '{}' in the workers' Python, {}; to run them with another interpreter, set "
      "PYTHON_EXEC=/path/to/python",
      module, failure.python);
}

std::string traceback_text(const WorkerFailure& failure) {
  std::vector<std::string> parts;
  const bool signal_line = !failure.error && failure.exitcode < 0;
  if (failure.error) {
    parts.push_back(error_text(*failure.error));
  } else if (signal_line) {
    parts.push_back(fmt::format("Signal {} ({}) received by PID {}", -failure.exitcode,
                                signal_name(-failure.exitcode), failure.pid));
  }
  if (failure.oom_killed) {
    // On the signal line when there is one: it names the sender of that signal.
    if (signal_line) {
      parts.back() += ": ";
    } else {
      parts.emplace_back();
    }
    parts.back() += kOomKilled;
  }
  if (std::string_view tail = trim_right(failure.stderr_tail); !failure.error && !tail.empty()) {
    parts.push_back("(last lines of stderr)\n  " + indent_continuation(tail, "  "));
  }
  if (parts.empty()) return std::string(kTracebackLink);
  // Worker-written text: bounded, and unable to drive the terminal. The file keeps all of it.
  Excerpt excerpt = last_lines(fmt::format("{}", fmt::join(parts, "\n")), kMaxTracebackLines, kMaxTracebackBytes);
  std::string text = terminal_safe(excerpt.text);
  // The hint comes after the bound, so a long traceback cannot push it out.
  if (std::string hint = module_hint(failure); !hint.empty()) text.append("\n").append(terminal_safe(hint));
  if (excerpt.omitted == 0) return text;
  std::string where = failure.error ? "; all of it is in " + terminal_safe(failure.error_file) : std::string();
  return fmt::format("({} earlier lines not shown{})\n{}", excerpt.omitted, where, text);
}

std::string format_failure(const WorkerFailure& failure) {
  return fmt::format(
      "[{}]:\n"
      "  time      : {}\n"
      "  host      : {}\n"
      "  rank      : {} (local_rank: {})\n"
      "  exitcode  : {} (pid: {})\n"
      "  error_file: {}\n"
      "  traceback : {}",
      failure.rank, local_time_text(failure_time_s(failure)), failure.host, failure.rank, failure.local_rank,
      failure.exitcode, failure.pid, failure.error ? std::string_view(failure.error_file) : kNotAvailable,
      indent_continuation(traceback_text(failure), "  "));
}

/// Python's len(): code points, which is what torchrun measures its lines in.
std::size_t characters(std::string_view utf8) {
  return static_cast<std::size_t>(std::count_if(
      utf8.begin(), utf8.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::size_t widest_line(std::string_view text) {
  std::size_t widest = 0;
  while (true) {
    auto end = text.find('\n');
    widest = std::max(widest, characters(text.substr(0, end)));
    if (end == std::string_view::npos) return widest;
    text.remove_prefix(end + 1);
  }
}

}  // namespace

std::string format_failure_summary(const std::string& program, const std::vector<WorkerFailure>& failures) {
  const std::string title = program + " FAILED";

  auto earlier = [](const WorkerFailure& a, const WorkerFailure& b) {
    return std::tuple(failure_time_s(a), a.time, a.rank) < std::tuple(failure_time_s(b), b.time, b.rank);
  };
  auto root = std::min_element(failures.begin(), failures.end(), earlier);

  std::vector<const WorkerFailure*> others;
  for (auto it = failures.begin(); it != failures.end(); ++it) {
    if (it != root) others.push_back(&*it);
  }
  std::stable_sort(others.begin(), others.end(), [&](auto* a, auto* b) { return earlier(*a, *b); });

  std::size_t width = characters(title);
  std::string root_text = root == failures.end() ? "  " + std::string(kNotAvailable) : format_failure(*root);
  width = std::max(width, widest_line(root_text));
  std::vector<std::string> other_texts;
  for (const auto* failure : others) {
    other_texts.push_back(format_failure(*failure));
    width = std::max(width, widest_line(other_texts.back()));
  }
  width = std::min(width, kMaxRuleWidth);

  const std::string border(width, '=');
  const std::string section(width, '-');
  return fmt::format(
      "{border}\n{title}\n{section}\nFailures:\n{others}\n{section}\nRoot Cause (first observed failure):\n"
      "{root}\n{border}\n",
      fmt::arg("border", border), fmt::arg("title", title), fmt::arg("section", section),
      fmt::arg("others", other_texts.empty() ? std::string("  <NO_OTHER_FAILURES>")
                                             : fmt::format("{}", fmt::join(other_texts, "\n"))),
      fmt::arg("root", root_text));
}

}  // namespace ddprun::launcher

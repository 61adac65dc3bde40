#include "launcher/observe/trace_command.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "launcher/output/console.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/observe/trace_convert.hpp"

namespace ddprun::launcher {
namespace {

constexpr const char* kUsage = "usage: ddprun trace EVENTS.jsonl... [-o FILE]";
/// Bad lines named one by one; past this, a count (a file that is not an event log at all).
constexpr std::size_t kBadLinesShown = 20;

struct TraceArgs {
  std::vector<std::string> inputs;
  std::string output;  ///< empty: stdout
  bool help = false;
};

TraceArgs parse_trace_args(const std::vector<std::string>& args) {
  TraceArgs parsed;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
    } else if (arg == "-o" || arg == "--output") {
      if (i + 1 == args.size()) throw UsageError("trace: " + arg + " needs a file name; " + kUsage);
      parsed.output = args[++i];
    } else if (arg.rfind("--output=", 0) == 0) {
      parsed.output = arg.substr(9);
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError("trace: unknown option " + arg + "; " + kUsage);
    } else {
      parsed.inputs.push_back(arg);
    }
  }
  if (!parsed.help && parsed.inputs.empty()) throw UsageError(std::string("trace: no event log given; ") + kUsage);
  return parsed;
}

std::string read_input(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LaunchError("trace: cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

bool is_trace_command(const std::vector<std::string>& args) { return !args.empty() && args[0] == "trace"; }

int run_trace_command(const std::vector<std::string>& args) {
  const TraceArgs parsed = parse_trace_args(args);
  if (parsed.help) {
    write_all(STDOUT_FILENO, std::string(kUsage) +
                                 "\nthe event logs of --events as one Chrome trace (open it in ui.perfetto.dev); "
                                 "to stdout without -o\n");
    return 0;
  }
  std::vector<JobEvent> events;
  std::string report;
  std::size_t bad_lines = 0;
  for (const std::string& input : parsed.inputs) {
    EventLines lines = read_event_lines(read_input(input));
    for (const BadEventLine& bad : lines.bad) {
      if (bad_lines++ < kBadLinesShown) report += "ddprun trace: " + input + ":" + std::to_string(bad.line) + ": " + bad.why + "\n";
    }
    for (JobEvent& event : lines.events) events.push_back(std::move(event));
  }
  if (bad_lines > kBadLinesShown) report += "ddprun trace: " + std::to_string(bad_lines - kBadLinesShown) + " more bad line(s)\n";
  if (events.empty()) {
    write_all(STDERR_FILENO, report + "ddprun trace: no events in " + parsed.inputs.front() +
                                 (parsed.inputs.size() > 1 ? " and the others" : "") + "\n");
    return 1;
  }
  const std::string trace = chrome_trace(std::move(events)).dump() + "\n";
  if (parsed.output.empty() || parsed.output == "-") {
    write_all(STDOUT_FILENO, trace);
  } else {
    std::ofstream out(parsed.output, std::ios::binary | std::ios::trunc);
    if (!out || !(out << trace) || !out.flush()) {
      throw LaunchError("trace: cannot write " + parsed.output + ": " + std::strerror(errno));
    }
  }
  write_all(STDERR_FILENO, report);
  return 0;
}

}  // namespace ddprun::launcher

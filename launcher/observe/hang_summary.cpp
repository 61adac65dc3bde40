#include "launcher/observe/hang_summary.hpp"

#include <algorithm>
#include <ctime>

#include "launcher/base/terminal_safe.hpp"

namespace ddprun::launcher {
namespace {

constexpr std::size_t kMaxRuleWidth = 60;

std::string local_time(std::chrono::system_clock::time_point time) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm local{};
  char text[32] = "";
  if (::localtime_r(&seconds, &local)) std::strftime(text, sizeof text, "%Y-%m-%d_%H:%M:%S", &local);
  return text;
}

}  // namespace

std::string format_hang_summary(const HangReport& report) {
  std::vector<std::string> lines = {
      "Root Cause: hang",
      "  time      : " + local_time(report.time),
      "  host      : " + report.host,
      "  hang      : " + report.hang,
      std::string("  action    : --hang-action ") + hang_action_name(report.action),
  };
  if (!report.stacks.empty()) lines.push_back("  stacks    : " + report.stacks);
  for (std::size_t i = 0; i < report.digest.size(); ++i) {
    // The digest quotes the workers' source lines: shown terminal-safe.
    lines.push_back((i == 0 ? "  where     : " : "              ") + terminal_safe(report.digest[i]));
  }
  const std::string title = report.program + " FAILED";
  std::size_t width = title.size();
  for (const auto& line : lines) width = std::max(width, line.size());
  width = std::min(width, kMaxRuleWidth);
  std::string text = std::string(width, '=') + "\n" + title + "\n" + std::string(width, '-') + "\n";
  for (const auto& line : lines) text += line + "\n";
  text += std::string(width, '=') + "\n";
  return text;
}

}  // namespace ddprun::launcher

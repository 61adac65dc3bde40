#pragma once
/// --hang-action: what ddprun does once it has reported a hang (--hang-timeout) and captured every
/// rank's stacks.
#include <optional>
#include <string_view>

namespace ddprun::launcher {

enum class HangAction {
  report,   ///< the digest and the stack files only; the job goes on (it may resume)
  stop,     ///< stop the workers; the job fails (exit status 1), the hang in the failure summary
  restart,  ///< stop the workers and restart them, as after a failure (counts against --max-restarts)
};

/// "report", "stop", "restart".
constexpr const char* hang_action_name(HangAction action) {
  switch (action) {
    case HangAction::report: return "report";
    case HangAction::stop: return "stop";
    case HangAction::restart: return "restart";
  }
  return "?";
}

constexpr std::optional<HangAction> parse_hang_action(std::string_view text) {
  for (HangAction action : {HangAction::report, HangAction::stop, HangAction::restart}) {
    if (text == hang_action_name(action)) return action;
  }
  return std::nullopt;
}

}  // namespace ddprun::launcher

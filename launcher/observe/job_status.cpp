#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher {

namespace {
constexpr struct {
  RankState state;
  const char* name;
} kStateNames[] = {
    {RankState::starting, "starting"}, {RankState::running, "running"}, {RankState::exited, "exited"},
    {RankState::failed, "failed"},     {RankState::stopped, "stopped"},
};
}  // namespace

const char* rank_state_name(RankState state) {
  for (const auto& entry : kStateNames) {
    if (entry.state == state) return entry.name;
  }
  return "unknown";
}

std::optional<RankState> parse_rank_state(const std::string& name) {
  for (const auto& entry : kStateNames) {
    if (name == entry.name) return entry.state;
  }
  return std::nullopt;
}

}  // namespace ddprun::launcher

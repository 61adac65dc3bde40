// The hang rule by table: each case is a job's life as successive samples of one node (two ranks),
// and the verdict expected after each.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "launcher/observe/hang_rule.hpp"

namespace ddprun::launcher {
namespace {

/// One rank at one sample.
struct R {
  double cpu = 0;               ///< cpu_seconds so far
  double output_age = -1;       ///< -1: no line yet
  std::optional<long> step;     ///< a progress report (step), none: never reported
  double progress_age = 0;
  RankState state = RankState::running;
  pid_t pid = 100;
};

struct Step {
  double time;
  std::vector<R> ranks;
  double idle;  ///< expected
  bool hung;
  bool newly;
  int attempt = 0;
};

struct Case {
  const char* name;
  double timeout;
  std::vector<Step> steps;
};

NodeStatus sample(const Step& step) {
  NodeStatus node;
  node.sampled_at = step.time;
  node.attempt = step.attempt;
  int rank = 0;
  for (const R& r : step.ranks) {
    RankStatus status;
    status.rank = rank;
    status.local_rank = rank;
    status.pid = r.pid + rank;
    status.state = r.state;
    status.cpu_seconds = r.cpu;
    status.output_age_seconds = r.output_age;
    if (r.step) status.progress = ProgressSample{*r.step, *r.step * 10, "", r.progress_age, 0, 0};
    node.ranks.push_back(status);
    ++rank;
  }
  return node;
}

constexpr auto exited = RankState::exited;
constexpr auto failed = RankState::failed;

const Case kCases[] = {
    {"idle from the first sample: hung once the timeout passed, reported once",
     10,
     {{100, {R{}, R{}}, 0, false, false},
      {105, {R{}, R{}}, 5, false, false},
      {110, {R{}, R{}}, 10, true, true},
      {111, {R{}, R{}}, 11, true, false},
      {150, {R{}, R{}}, 50, true, false}}},
    {"slow but progressing (a report every 8 s, timeout 10): never hung",
     10,
     {{100, {R{.step = 0}, R{.step = 0}}, 0, false, false},
      {107, {R{.step = 0, .progress_age = 7}, R{.step = 0, .progress_age = 7}}, 7, false, false},
      {109, {R{.step = 1, .progress_age = 1}, R{.step = 0, .progress_age = 9}}, 1, false, false},
      {117, {R{.step = 2, .progress_age = 0}, R{.step = 1, .progress_age = 1}}, 0, false, false},
      {126, {R{.step = 2, .progress_age = 9}, R{.step = 2, .progress_age = 2}}, 2, false, false}}},
    {"one rank's progress is enough: the job is not hung while any rank moves",
     10,
     {{100, {R{.step = 0}, R{.step = 0}}, 0, false, false},
      {112, {R{.step = 5, .progress_age = 1}, R{.step = 0, .progress_age = 12}}, 1, false, false}}},
    {"an output line is activity, at the line's time",
     10,
     {{100, {R{}, R{}}, 0, false, false},
      {109, {R{.output_age = 0.5}, R{}}, 0.5, false, false},
      {119, {R{.output_age = 10.5}, R{}}, 10.5, true, true}}},
    {"CPU counts for ranks that never report: a long computation that prints nothing is not hung",
     10,
     {{100, {R{.cpu = 1}, R{.cpu = 1}}, 0, false, false},
      {106, {R{.cpu = 7}, R{.cpu = 1}}, 0, false, false},
      {112, {R{.cpu = 13}, R{.cpu = 1}}, 0, false, false},
      {118, {R{.cpu = 13.06}, R{.cpu = 1}}, 6, false, false},  // 0.06 s in 6 s: 1 % of a core, below 2 %
      {121, {R{.cpu = 13.2}, R{.cpu = 1}}, 0, false, false},   // 0.14 s in 3 s: 4.7 %, a busy rank on a crowded machine
      {131, {R{.cpu = 13.25}, R{.cpu = 1.01}}, 10, true, true}}},
    {"CPU does not count once a rank reports progress: a collective spinning while hung is a hang",
     10,
     {{100, {R{.cpu = 1, .step = 3}, R{.cpu = 1, .step = 3}}, 0, false, false},
      {105, {R{.cpu = 6, .step = 3, .progress_age = 5}, R{.cpu = 6, .step = 3, .progress_age = 5}}, 5, false, false},
      {110, {R{.cpu = 11, .step = 3, .progress_age = 10}, R{.cpu = 11, .step = 3, .progress_age = 10}}, 10, true,
       true}}},
    {"reported again only after progress resumed",
     10,
     {{100, {R{.step = 0}, R{.step = 0}}, 0, false, false},
      {110, {R{.step = 0, .progress_age = 10}, R{.step = 0, .progress_age = 10}}, 10, true, true},
      {111, {R{.step = 0, .progress_age = 11}, R{.step = 0, .progress_age = 11}}, 11, true, false},
      {112, {R{.step = 1, .progress_age = 0}, R{.step = 0, .progress_age = 12}}, 0, false, false},
      {121, {R{.step = 1, .progress_age = 9}, R{.step = 0, .progress_age = 21}}, 9, false, false},
      {122, {R{.step = 1, .progress_age = 10}, R{.step = 0, .progress_age = 22}}, 10, true, true}}},
    {"a rank exiting is activity; once none runs, nothing is hung",
     10,
     {{100, {R{}, R{}}, 0, false, false},
      {109, {R{.state = exited}, R{}}, 0, false, false},
      {119, {R{.state = exited}, R{}}, 10, true, true},
      {120, {R{.state = exited}, R{.state = failed}}, 0, false, false}}},
    {"a new attempt (restart) starts the clock again",
     10,
     {{100, {R{}, R{}}, 0, false, false},
      {110, {R{}, R{}}, 10, true, true},
      {111, {R{.pid = 200}, R{.pid = 200}}, 0, false, false, 1},
      {120, {R{.pid = 200}, R{.pid = 200}}, 9, false, false, 1},
      {121, {R{.pid = 200}, R{.pid = 200}}, 10, true, true, 1}}},
    {"a rank's new process (same attempt) counts as activity",
     10,
     {{100, {R{}, R{}}, 0, false, false},
      {108, {R{}, R{.pid = 300}}, 0, false, false},
      {118, {R{}, R{.pid = 300}}, 10, true, true}}},
    {"timeout 0: never hung, idle still measured",
     0,
     {{100, {R{}, R{}}, 0, false, false},
      {1000, {R{}, R{}}, 900, false, false}}},
};

TEST(HangRule, EveryCase) {
  for (const Case& c : kCases) {
    HangRule rule(HangRuleSettings{.timeout_seconds = c.timeout});
    int index = 0;
    for (const Step& step : c.steps) {
      HangVerdict verdict = rule.observe(sample(step));
      EXPECT_DOUBLE_EQ(verdict.idle_seconds, step.idle) << c.name << ", sample " << index;
      EXPECT_EQ(verdict.hung, step.hung) << c.name << ", sample " << index;
      EXPECT_EQ(verdict.newly_hung, step.newly) << c.name << ", sample " << index;
      ++index;
    }
  }
}

}  // namespace
}  // namespace ddprun::launcher

// The straggler rule and the rate window it is fed from, by table: a rank persistently below 70 % of
// the median is named, one slow sample names nobody, too few reporting ranks name nobody.
#include "launcher/observe/straggler_rule.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "launcher/observe/rate_window.hpp"

namespace ddprun::launcher {
namespace {

TEST(MedianOf, MiddleValueOrMeanOfTheMiddleTwo) {
  struct Case {
    std::vector<double> values;
    double median;
  };
  const std::vector<Case> cases{
      {{}, 0}, {{5}, 5}, {{3, 1, 2}, 2}, {{4, 1, 3, 2}, 2.5}, {{10, 10, 10, 5}, 10}, {{0, 0, 7}, 0},
  };
  for (const auto& c : cases) EXPECT_DOUBLE_EQ(median_of(c.values), c.median);
}

using Rates = std::vector<std::optional<double>>;

/// Feeds `samples` to a rule; returns the flags after each.
std::vector<std::vector<bool>> run(const std::vector<Rates>& samples, StragglerSettings settings = {}) {
  StragglerRule rule(settings);
  std::vector<std::vector<bool>> out;
  for (const auto& rates : samples) out.push_back(rule.update(rates));
  return out;
}

TEST(StragglerRule, NamesARankPersistentlyBelowTheLine) {
  StragglerSettings settings;
  settings.persistence = 3;
  const Rates slow{100.0, 100.0, 50.0, 100.0};  // rank 2 at half the median
  auto flags = run({slow, slow, slow, slow}, settings);
  EXPECT_EQ(flags[0], (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(flags[1], (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(flags[2], (std::vector<bool>{false, false, true, false}));  // the third sample in a row
  EXPECT_EQ(flags[3], (std::vector<bool>{false, false, true, false}));
}

TEST(StragglerRule, Table) {
  struct Case {
    const char* name;
    std::vector<Rates> samples;
    std::vector<bool> last;  ///< the flags after the last sample
  };
  const Rates fine{100.0, 98.0, 101.0, 99.0};
  const Rates slow{100.0, 98.0, 60.0, 99.0};
  const std::vector<Case> cases{
      {"all alike", {fine, fine, fine, fine, fine}, {false, false, false, false}},
      {"persistently slow", {slow, slow, slow}, {false, false, true, false}},
      {"one slow sample among good ones", {fine, slow, fine, fine, fine}, {false, false, false, false}},
      {"slow, then back at the line", {slow, slow, slow, fine}, {false, false, false, false}},
      {"a break in the run starts the count again", {slow, slow, fine, slow, slow}, {false, false, false, false}},
      {"just above 70 % is not slow", {{100.0, 100.0, 71.0}, {100.0, 100.0, 71.0}, {100.0, 100.0, 71.0}}, {false, false, false}},
      {"two reporting ranks are too few", {{100.0, 10.0}, {100.0, 10.0}, {100.0, 10.0}}, {false, false}},
      {"silent ranks do not count toward the three",
       {{100.0, std::nullopt, 10.0, std::nullopt}, {100.0, std::nullopt, 10.0, std::nullopt}, {100.0, std::nullopt, 10.0, std::nullopt}},
       {false, false, false, false}},
      {"everyone stopped is a hang, not stragglers", {{0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}}, {false, false, false}},
      {"a stopped rank among moving ones", {{10.0, 10.0, 0.0}, {10.0, 10.0, 0.0}, {10.0, 10.0, 0.0}}, {false, false, true}},
      {"a new attempt (other rank count) starts over", {slow, slow, {100.0, 98.0, 60.0}}, {false, false, false}},
  };
  StragglerSettings settings;
  settings.persistence = 3;
  for (const auto& c : cases) EXPECT_EQ(run(c.samples, settings).back(), c.last) << c.name;
}

// The GPU straggler rule's settings (kGpuStragglerSettings): a rank's GPU utilisation below half
// the median, while the median is above 30 % (the others work), with two ranks enough.
TEST(StragglerRule, GpuUtilisationTable) {
  struct Case {
    const char* name;
    Rates sample;  ///< repeated for the rule's persistence
    std::vector<bool> last;
  };
  const std::vector<Case> cases{
      {"one idle GPU beside a busy one", {95.0, 2.0}, {false, true}},
      {"all busy", {95.0, 90.0, 97.0}, {false, false, false}},
      {"all idle (waiting on I/O) names nobody", {5.0, 0.0, 3.0}, {false, false, false}},
      {"the median at the floor names nobody", {30.0, 30.0, 1.0}, {false, false, false}},
      {"just above half the median is not behind", {80.0, 80.0, 41.0}, {false, false, false}},
      {"just below is", {80.0, 80.0, 39.0}, {false, false, true}},
      {"a rank without GPU figures is not judged", {95.0, std::nullopt, 2.0}, {false, false, true}},
  };
  for (const auto& c : cases) {
    std::vector<Rates> samples(static_cast<std::size_t>(kGpuStragglerSettings.persistence), c.sample);
    EXPECT_EQ(run(samples, kGpuStragglerSettings).back(), c.last) << c.name;
    // One sample short of the persistence names nobody.
    samples.pop_back();
    EXPECT_EQ(run(samples, kGpuStragglerSettings).back(), std::vector<bool>(c.last.size(), false)) << c.name;
  }
}

TEST(StragglerRule, OtherNodesRanksSetTheLineButAreNeverNamed) {
  struct Case {
    const char* name;
    Rates local;
    std::vector<double> peers;
    std::vector<bool> flags;  ///< after three samples alike
    double median;            ///< the last update's median (0: nobody can be named)
  };
  const std::vector<Case> cases{
      {"a node whose ranks are all slow is named against the job", {50.0, 52.0}, {100.0, 101.0, 99.0, 100.0}, {true, true}, 99.5},
      {"the same node alone looks fine", {50.0, 52.0, 51.0}, {}, {false, false, false}, 51.0},
      {"one local rank with peers is enough ranks", {40.0}, {100.0, 100.0}, {true}, 100.0},
      {"one local rank and one peer are too few", {40.0}, {100.0}, {false}, 0},
      {"fast local ranks among slow peers are not stragglers", {100.0, 100.0}, {50.0, 50.0, 50.0}, {false, false}, 50.0},
      {"a silent local rank is not named whatever the peers", {std::nullopt, 100.0}, {100.0, 100.0}, {false, false}, 100.0},
  };
  StragglerSettings settings;
  settings.persistence = 3;
  for (const auto& c : cases) {
    StragglerRule rule(settings);
    std::vector<bool> flags;
    for (int i = 0; i < 3; ++i) flags = rule.update(c.local, c.peers);
    EXPECT_EQ(flags, c.flags) << c.name;
    EXPECT_DOUBLE_EQ(rule.median(), c.median) << c.name;
  }
}

TEST(RateWindow, RatesOverTheWindowNotTheLastSample) {
  RateWindow window(10.0, 2.0);
  EXPECT_FALSE(window.rates());
  window.add(0, 0, 0);
  window.add(1, 10, 320);
  EXPECT_FALSE(window.rates());  // spans 1 s, less than the 2 s asked for
  window.add(2, 20, 640);
  ASSERT_TRUE(window.rates());
  EXPECT_DOUBLE_EQ(window.rates()->steps_per_second, 10.0);
  EXPECT_DOUBLE_EQ(window.rates()->samples_per_second, 320.0);
  // Steady at 10 steps/s up to t=12, then one second without a step: the rate over the window dips a little.
  for (int t = 3; t <= 12; ++t) window.add(t, 10 * t, 320 * t);
  EXPECT_DOUBLE_EQ(window.rates()->steps_per_second, 10.0);
  window.add(13, 120, 3840);
  EXPECT_DOUBLE_EQ(window.rates()->steps_per_second, 9.0);  // (120 - 30) / 10
  // Counters that go back (a worker that started over) start the window again.
  window.add(14, 0, 0);
  EXPECT_FALSE(window.rates());
}

}  // namespace
}  // namespace ddprun::launcher

#pragma once
/// The straggler rule: a rank whose step rate stays below `ratio` (70 %) of the median rate of the
/// reporting ranks for `persistence` samples in a row is a straggler, until its rate is back at or
/// above that line. One slow sample (a checkpoint, a stall of a second) names nobody: the rates are
/// already taken over a window (rate_window.hpp), and the rule asks for that window to stay low.
///
/// Only ranks that report progress count. With fewer than `min_ranks` of them there is no "the
/// others" to be slower than, and nobody is named; nor while the median itself is zero (everyone
/// stopped: that is a hang, not a straggler) or at most `floor`. Pure: the monitor feeds it each sample's rates.
///
/// In a multi-node job the line is the job's: the median takes in the other nodes' ranks too (their
/// rates as their agents last published them, `peers`), so that a node whose ranks are all slow
/// names them, and a node of one rank can tell it is behind. Each agent names only its own ranks.
#include <cstddef>
#include <optional>
#include <vector>

namespace ddprun::launcher {

struct StragglerSettings {
  double ratio = 0.7;
  std::size_t min_ranks = 3;
  int persistence = 5;  ///< samples in a row below the line
  /// Nobody is named unless the median is above this: for GPU utilisation, the others must be
  /// working (a job waiting on I/O has every GPU idle, and none of them is behind).
  double floor = 0;
};

/// The GPU straggler rule's settings: a rank whose GPUs are busy less than half the median of the
/// ranks', for 5 GPU samples in a row (the status monitor feeds it each GPU sample, every 2 s), while
/// that median is above 30 %; two ranks suffice (one idle GPU beside a busy one is the case to see).
inline constexpr StragglerSettings kGpuStragglerSettings{.ratio = 0.5, .min_ranks = 2, .persistence = 5, .floor = 30};

/// The median of `values` (the mean of the middle two for an even count); 0 for none.
double median_of(std::vector<double> values);

class StragglerRule {
 public:
  explicit StragglerRule(StragglerSettings settings = {}) : settings_(settings) {}

  /// One sample: each rank's step rate over the window (by position; nothing = not reporting, or
  /// no rate yet), and the step rates of the job's ranks on other nodes (`peers`: counted in the
  /// median, never named). Returns whether each rank is a straggler now. A change in the number of
  /// ranks (a new attempt) starts over.
  std::vector<bool> update(const std::vector<std::optional<double>>& rates, const std::vector<double>& peers = {});

  /// The median of the last update (0 when it named nobody for want of ranks), for the message
  /// that names a straggler.
  double median() const { return median_; }

 private:
  StragglerSettings settings_;
  std::vector<int> below_;  ///< samples in a row below the line, per rank
  double median_ = 0;
};

}  // namespace ddprun::launcher

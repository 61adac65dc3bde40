#pragma once
/// RateWindow: a rank's step and sample rates over the last seconds, from the monitor's samples of
/// its progress counters. Pure (the caller passes the time), so a table test drives it.
///
/// The rate is measured between the newest sample and the newest one at least `window` seconds
/// older (or the oldest kept, while the window fills): a window, not the last second, so that a
/// rank whose steps come in bursts (an epoch's evaluation, a checkpoint) is not called slow or fast
/// by one sample.
#include <cstdint>
#include <deque>
#include <optional>

namespace ddprun::launcher {

class RateWindow {
 public:
  struct Rates {
    double steps_per_second = 0;
    double samples_per_second = 0;
  };

  explicit RateWindow(double window_seconds = 10.0, double min_span_seconds = 2.0)
      : window_(window_seconds), min_span_(min_span_seconds) {}

  /// The counters as read at time `t` (seconds, non-decreasing). Counters that went back (a worker
  /// that started over) start the window again.
  void add(double t, std::int64_t step, std::int64_t samples) {
    if (!points_.empty() && (step < points_.back().step || samples < points_.back().samples)) points_.clear();
    points_.push_back({t, step, samples});
    // Keep the newest point at or before the window's start as its anchor; drop the older ones.
    while (points_.size() > 2 && points_[1].t <= t - window_) points_.pop_front();
  }

  /// Rates over the window; nothing until the points span `min_span` seconds.
  std::optional<Rates> rates() const {
    if (points_.size() < 2) return std::nullopt;
    const Point& first = points_.front();
    const Point& last = points_.back();
    const double span = last.t - first.t;
    if (span < min_span_) return std::nullopt;
    return Rates{static_cast<double>(last.step - first.step) / span,
                 static_cast<double>(last.samples - first.samples) / span};
  }

  void clear() { points_.clear(); }

 private:
  struct Point {
    double t;
    std::int64_t step;
    std::int64_t samples;
  };
  double window_;
  double min_span_;
  std::deque<Point> points_;
};

}  // namespace ddprun::launcher

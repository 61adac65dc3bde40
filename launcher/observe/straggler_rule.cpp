#include "launcher/observe/straggler_rule.hpp"

#include <algorithm>

namespace ddprun::launcher {

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
  const double upper = values[middle];
  if (values.size() % 2 != 0) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle));
  return (lower + upper) / 2;
}

std::vector<bool> StragglerRule::update(const std::vector<std::optional<double>>& rates,
                                        const std::vector<double>& peers) {
  if (below_.size() != rates.size()) below_.assign(rates.size(), 0);
  std::vector<double> reporting = peers;
  for (const auto& rate : rates) {
    if (rate) reporting.push_back(*rate);
  }
  std::vector<bool> stragglers(rates.size(), false);
  const double median = median_of(reporting);
  median_ = median;
  if (reporting.size() < settings_.min_ranks || median <= 0 || median <= settings_.floor) {
    std::fill(below_.begin(), below_.end(), 0);
    median_ = 0;
    return stragglers;
  }
  const double line = settings_.ratio * median;
  for (std::size_t i = 0; i < rates.size(); ++i) {
    below_[i] = rates[i] && *rates[i] < line ? below_[i] + 1 : 0;
    stragglers[i] = below_[i] >= settings_.persistence;
  }
  return stragglers;
}

}  // namespace ddprun::launcher

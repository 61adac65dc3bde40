#include "common/slurm_nodelist.hpp"

#include <cstdint>
#include <stdexcept>

#include "common/integer.hpp"

namespace ddprun::common {
namespace {

[[noreturn]] void fail(std::string text) { throw std::invalid_argument(std::move(text)); }

[[noreturn]] void malformed_counts() { fail("expected e.g. \"2(x3),1\""); }

/// Expands one host expression without top-level commas: "n[01-02]-ib[1,3]" is a product.
void expand_host(std::string_view pattern, std::string prefix, std::vector<std::string>& out) {
  auto open = pattern.find('[');
  if (open == std::string_view::npos) {
    if (pattern.find(']') != std::string_view::npos) fail("unbalanced ']' in \"" + std::string(pattern) + "\"");
    out.push_back(prefix + std::string(pattern));
    if (out.size() > kMaxSlurmListSize) fail("more than " + std::to_string(kMaxSlurmListSize) + " hosts");
    return;
  }
  auto close = pattern.find(']', open);
  if (close == std::string_view::npos) fail("unbalanced '[' in \"" + std::string(pattern) + "\"");
  std::string_view head = pattern.substr(0, open);
  if (head.find(']') != std::string_view::npos) fail("unbalanced ']' in \"" + std::string(pattern) + "\"");
  std::string_view ranges = pattern.substr(open + 1, close - open - 1);
  std::string_view rest = pattern.substr(close + 1);
  prefix += head;
  if (ranges.empty()) fail("empty brackets in \"" + std::string(pattern) + "\"");
  std::size_t start = 0;
  while (start <= ranges.size()) {
    std::size_t end = ranges.find(',', start);
    if (end == std::string_view::npos) end = ranges.size();
    std::string_view range = ranges.substr(start, end - start);
    std::size_t dash = range.find('-');
    std::string_view low_text = range.substr(0, dash);
    std::string_view high_text = dash == std::string_view::npos ? low_text : range.substr(dash + 1);
    auto low = parse_integer<std::int64_t>(low_text);
    auto high = parse_integer<std::int64_t>(high_text);
    if (!low || !high || *low < 0 || *high < *low) {
      fail("bad range \"" + std::string(range) + "\" in \"" + std::string(pattern) + "\"");
    }
    if (static_cast<std::uint64_t>(*high - *low) >= kMaxSlurmListSize) {
      fail("more than " + std::to_string(kMaxSlurmListSize) + " hosts");
    }
    // Slurm keeps the zero padding of the lower bound: node[01-10] -> node01 .. node10.
    const std::size_t width = low_text.size();
    for (std::int64_t n = *low; n <= *high; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      expand_host(rest, prefix + digits, out);
    }
    start = end + 1;
  }
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(std::string_view nodelist) {
  std::vector<std::string> hosts;
  std::size_t start = 0;
  int depth = 0;
  // Split at commas outside brackets: "node[01-03,07],gpu5" is two host expressions.
  for (std::size_t i = 0; i <= nodelist.size(); ++i) {
    if (i < nodelist.size() && nodelist[i] == '[') ++depth;
    if (i < nodelist.size() && nodelist[i] == ']') --depth;
    if (depth < 0) fail("unbalanced ']' in Slurm node list \"" + std::string(nodelist) + "\"");
    if (i == nodelist.size() || (nodelist[i] == ',' && depth == 0)) {
      std::string_view item = nodelist.substr(start, i - start);
      if (item.empty()) fail("empty host in Slurm node list \"" + std::string(nodelist) + "\"");
      expand_host(item, {}, hosts);
      start = i + 1;
    }
  }
  if (depth != 0) fail("unbalanced '[' in Slurm node list \"" + std::string(nodelist) + "\"");
  return hosts;
}

std::vector<int> expand_slurm_counts(std::string_view text) {
  std::vector<int> counts;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    std::int64_t repeat = 1;
    if (auto open = item.find('('); open != std::string_view::npos) {
      if (item.size() < open + 4 || item.substr(open, 2) != "(x" || item.back() != ')') malformed_counts();
      auto times = parse_integer<std::int64_t>(item.substr(open + 2, item.size() - open - 3));
      if (!times || *times < 1 || *times > static_cast<std::int64_t>(kMaxSlurmListSize)) malformed_counts();
      repeat = *times;
      item = item.substr(0, open);
    }
    auto count = parse_integer<std::int64_t>(item);
    if (!count || *count < 0 || *count > INT32_MAX) malformed_counts();
    if (counts.size() + static_cast<std::size_t>(repeat) > kMaxSlurmListSize) malformed_counts();
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), static_cast<int>(*count));
    start = end + 1;
  }
  return counts;
}

}  // namespace ddprun::common

#include "common/integer.hpp"

#include <charconv>
#include <system_error>

namespace ddprun::common {

template <std::integral T>
std::optional<T> parse_integer(std::string_view text, int base) {
  T value{};
  const char* end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, value, base);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return value;
}

// Defined here, so that <charconv> stays out of every file that parses a number.
template std::optional<short> parse_integer<short>(std::string_view, int);
template std::optional<unsigned short> parse_integer<unsigned short>(std::string_view, int);
template std::optional<int> parse_integer<int>(std::string_view, int);
template std::optional<unsigned> parse_integer<unsigned>(std::string_view, int);
template std::optional<long> parse_integer<long>(std::string_view, int);
template std::optional<unsigned long> parse_integer<unsigned long>(std::string_view, int);
template std::optional<long long> parse_integer<long long>(std::string_view, int);
template std::optional<unsigned long long> parse_integer<unsigned long long>(std::string_view, int);

}  // namespace ddprun::common

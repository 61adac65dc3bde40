#pragma once
/// Integers from text: the one parser ddprun uses wherever text (a flag's value, an environment
/// variable, a /proc field, a store counter) becomes a number.
#include <concepts>
#include <optional>
#include <string_view>

namespace ddprun::common {

/// All of `text` as an integer of type T in `base` (2..36), by std::from_chars's rules: digits with
/// an optional '-' for signed types, no '+', no white space, no "0x", nothing left over, no overflow.
/// Nothing when any of that fails, and for an empty text. The range a caller needs beyond T's
/// (a port, a rank >= 0) is the caller's check. Instantiated for the standard integer types.
template <std::integral T>
std::optional<T> parse_integer(std::string_view text, int base = 10);

}  // namespace ddprun::common

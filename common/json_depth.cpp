#include "common/json_depth.hpp"

namespace ddprun::common {

std::optional<std::size_t> json_too_deep_at(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character, a '"' or a '\\' included, cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > limit) return i;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;  // unbalanced text is the parser's to refuse
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

std::string json_too_deep_words(std::size_t limit) { return "nested deeper than " + std::to_string(limit) + " levels"; }

}  // namespace ddprun::common

#include "launcher/cli/preload_list.hpp"

#include <algorithm>

#include "launcher/cli/cli_values.hpp"  // quote_for_message

namespace ddprun::launcher {
namespace {

bool is_identifier(std::string_view name) {
  if (name.empty()) return false;
  auto head = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!head(name.front())) return false;
  for (char c : name) {
    if (!head(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

}  // namespace

PreloadList parse_preload_list(std::string_view text) {
  PreloadList list;
  if (text.empty()) {
    list.error = "names no module";
    return list;
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view name = text.substr(start, comma - start);
    std::size_t part = 0;
    bool valid = !name.empty();
    while (valid && part <= name.size()) {
      const std::size_t dot = std::min(name.find('.', part), name.size());
      valid = is_identifier(name.substr(part, dot - part));
      part = dot + 1;
    }
    if (!valid) {
      list.modules.clear();
      list.error = name.empty() ? "has an empty entry" : "has " + quote_for_message(std::string(name)) + ", which is not a module name";
      return list;
    }
    list.modules.emplace_back(name);
    start = comma + 1;
  }
  return list;
}

}  // namespace ddprun::launcher

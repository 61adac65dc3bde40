#pragma once
/// The one way ddprun parses JSON it did not write itself: nlohmann's parse after json_depth.hpp's
/// check, so that a document nested deeper than kJsonDepthLimit is refused before any value is
/// built (nothing downstream then recurses deeper than that). Header-only: only code that links
/// nlohmann_json includes it (ddprun_common itself does not link it).
#include <nlohmann/json.hpp>
#include <string_view>

#include "common/json_depth.hpp"

namespace ddprun::common {

/// nlohmann::json::parse(text), except that text nested too deep throws json::parse_error (id 101,
/// at the byte that went too deep, its words json_too_deep_words()), as text that is not JSON does.
inline nlohmann::json parse_bounded_json(std::string_view text) {
  if (const auto at = json_too_deep_at(text)) {
    throw nlohmann::json::parse_error::create(101, *at + 1, json_too_deep_words(), nullptr);
  }
  return nlohmann::json::parse(text);
}

/// The same without exceptions: a discarded value (is_discarded()) for text that is not JSON or
/// nests too deep, as nlohmann::json::parse(text, nullptr, false) gives.
inline nlohmann::json parse_bounded_json_or_discarded(std::string_view text) {
  if (json_too_deep_at(text)) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

/// Whether `error` is parse_bounded_json's refusal of a document nested too deep (to name it
/// rather than say "not JSON").
inline bool is_too_deep(const nlohmann::json::parse_error& error) {
  return std::string_view(error.what()).find(json_too_deep_words()) != std::string_view::npos;
}

}  // namespace ddprun::common

// The depth check every JSON from outside passes before nlohmann builds a value
// (common/json_depth.hpp, common/bounded_json.hpp): the limit's edges, brackets inside strings,
// escapes that would end a string if misread, and what the bounded parse throws or gives.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/bounded_json.hpp"
#include "common/json_depth.hpp"

using ddprun::common::json_too_deep_at;
using ddprun::common::kJsonDepthLimit;

namespace {

/// `depth` arrays, one in the other, around `inside`.
std::string nested(std::size_t depth, const std::string& inside = "") {
  return std::string(depth, '[') + inside + std::string(depth, ']');
}

}  // namespace

TEST(JsonDepth, TheLimitsEdgesAndBracketsThatDoNotCount) {
  const std::size_t limit = kJsonDepthLimit;
  struct Case {
    std::string text;
    std::optional<std::size_t> too_deep_at;
  } cases[] = {
      {"", std::nullopt},
      {"1", std::nullopt},
      {"[]", std::nullopt},
      {nested(limit - 1), std::nullopt},
      {nested(limit), std::nullopt},  // exactly the limit is fine
      {nested(limit + 1), limit},     // the bracket that opens level limit + 1
      {nested(100000), limit},
      // Objects count as arrays do, mixed.
      {"{\"a\":" + nested(limit - 1) + "}", std::nullopt},
      {"{\"a\":" + nested(limit) + "}", 5 + limit - 1},
      // Siblings do not add up: depth, not count.
      {"[" + nested(limit - 1) + "," + nested(limit - 1) + "]", std::nullopt},
      // Brackets inside strings are text.
      {"[\"" + std::string(1000, '[') + "\"]", std::nullopt},
      {"{\"" + std::string(1000, '{') + "\":1}", std::nullopt},
      // An escaped quote does not end the string; the brackets after it are still text.
      {"[\"\\\"" + std::string(1000, '[') + "\"]", std::nullopt},
      // An escaped backslash does: the brackets after the string's end count.
      {"[\"\\\\\"," + nested(limit) + "]", 6 + limit - 1},
      // \u escapes are plain characters to the scan.
      {"[\"\\u005b\\u005b\"]", std::nullopt},
      // Closing brackets before any opening one, or unbalanced ones, are the parser's business.
      {"]]]]" + nested(limit), std::nullopt},
      {std::string(limit, '['), std::nullopt},
      {std::string(limit + 1, '['), limit},
      // A string never closed hides what follows (the parser refuses the text anyway).
      {"[\"" + nested(limit + 1), std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(json_too_deep_at(c.text), c.too_deep_at) << c.text.substr(0, 80);
  }
  EXPECT_EQ(json_too_deep_at(nested(3), 2), 2U);
  EXPECT_EQ(json_too_deep_at(nested(2), 2), std::nullopt);
  EXPECT_EQ(ddprun::common::json_too_deep_words(), "nested deeper than 64 levels");
}

TEST(JsonDepth, TheBoundedParseRefusesBeforeBuildingAndParsesTheRest) {
  using nlohmann::json;
  EXPECT_EQ(ddprun::common::parse_bounded_json("{\"a\":" + nested(kJsonDepthLimit - 1, "1") + "}").dump().size(),
            2 * kJsonDepthLimit + 5);
  try {
    ddprun::common::parse_bounded_json(nested(100000));
    ADD_FAILURE() << "a document 100,000 deep was parsed";
  } catch (const json::parse_error& error) {
    EXPECT_TRUE(ddprun::common::is_too_deep(error)) << error.what();
    EXPECT_EQ(error.byte, kJsonDepthLimit + 1);
  }
  try {
    ddprun::common::parse_bounded_json("[1,");
    ADD_FAILURE() << "text that is not JSON was parsed";
  } catch (const json::parse_error& error) {
    EXPECT_FALSE(ddprun::common::is_too_deep(error)) << error.what();
  }
  EXPECT_TRUE(ddprun::common::parse_bounded_json_or_discarded(nested(100000)).is_discarded());
  EXPECT_TRUE(ddprun::common::parse_bounded_json_or_discarded("[1,").is_discarded());
  EXPECT_EQ(ddprun::common::parse_bounded_json_or_discarded("[\"]\"]"), json::array({"]"}));
}

#pragma once
/// How deeply JSON from outside may nest, judged on the bytes before any parser builds a value.
///
/// nlohmann's parser itself is iterative, but what ddprun then does with a value (copy it, compare
/// it, dump it) recurses once per level: a line of 100,000 '[' (200 KB) overflows the stack and
/// kills ddprun with SIGSEGV. Every document ddprun reads from outside (event logs, other nodes'
/// status and stack answers, the rendezvous records, etcd's replies, a worker's error file, the run
/// registry) is at most a handful of levels deep (a status answer: job, nodes, node, ranks, rank,
/// progress, i.e. 6), so the limit is generous and never met by a real document. Pure, no
/// allocation; the parse that uses it is bounded_json.hpp's.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::common {

/// The deepest nesting of arrays and objects ddprun accepts in JSON from outside ('[[1]]' is 2).
inline constexpr std::size_t kJsonDepthLimit = 64;

/// The offset of the first '[' or '{' in `text` that opens level `limit + 1`, or nullopt when no
/// array or object nests deeper than `limit`. Brackets inside strings (escapes included) do not
/// count. Text that is not JSON is not judged here: the parser says what is wrong with it.
std::optional<std::size_t> json_too_deep_at(std::string_view text, std::size_t limit = kJsonDepthLimit);

/// "nested deeper than 64 levels": the words for a document json_too_deep_at refused.
std::string json_too_deep_words(std::size_t limit = kJsonDepthLimit);

}  // namespace ddprun::common

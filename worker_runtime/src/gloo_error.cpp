#include "gloo_error.hpp"

#include <cctype>
#include <gloo/common/error.h>

#include "ddprun/error.hpp"

namespace ddprun::detail {
namespace {

bool contains_ignoring_case(std::string_view text, std::string_view word) {
  if (word.size() > text.size()) return false;
  for (std::size_t i = 0; i + word.size() <= text.size(); ++i) {
    std::size_t j = 0;
    while (j < word.size() && std::tolower(static_cast<unsigned char>(text[i + j])) == word[j]) ++j;
    if (j == word.size()) return true;
  }
  return false;
}

/// gloo prefixes its messages with "[/path/to/file.cc:123] "; users need the rest.
std::string_view without_source_location(std::string_view message) {
  if (message.starts_with("[")) {
    auto end = message.find("] ");
    if (end != std::string_view::npos && message.substr(0, end).find(".cc:") != std::string_view::npos) {
      return message.substr(end + 2);
    }
  }
  return message;
}

}  // namespace

std::exception_ptr translate_gloo_failure(const FailureContext& context, const std::exception& error) {
  const std::string_view cause = without_source_location(error.what());
  const std::string where =
      context.operation + " on rank " + std::to_string(context.rank) + " of " + std::to_string(context.size);
  // A message that quotes a peer's address names it; with two ranks there is only one peer anyway.
  int peer = -1;
  if (context.peers != nullptr) peer = context.peers->find_in(cause).value_or(-1);
  if (peer < 0 && context.size == 2) peer = 1 - context.rank;
  std::string peer_name;
  if (peer >= 0) {
    peer_name = "rank " + std::to_string(peer);
    auto address = context.peers != nullptr ? context.peers->address_of(peer) : std::nullopt;
    if (address) peer_name += " (" + *address + ")";
  }

  const bool timed_out = contains_ignoring_case(cause, "timed out") || contains_ignoring_case(cause, "timeout");
  if (timed_out && !contains_ignoring_case(cause, "caused pair closure")) {
    // A ring or tree waits on its neighbours, and a neighbour may itself be waiting: with more than
    // two ranks the one that is hung or dead is not known here (its own log, or its exit, tells).
    return std::make_exception_ptr(
        TimeoutError(where + " timed out: no progress for " + std::to_string(context.timeout.count()) + " ms" +
                     (peer_name.empty() ? "" : " waiting for " + peer_name) +
                     "; a peer is hung, dead, or not running the same collective (gloo: " + std::string(cause) + ")"));
  }
  if (dynamic_cast<const gloo::IoException*>(&error) == nullptr) {
    return std::make_exception_ptr(Error(where + " failed: " + std::string(cause)));
  }
  const std::string lost = peer_name.empty() ? "a connection to a peer" : "the connection to " + peer_name;
  return std::make_exception_ptr(
      Error(where + " failed: " + lost +
            " broke (the peer died, or gave up after a failure of its own) (gloo: " + std::string(cause) + ")"));
}

}  // namespace ddprun::detail

#include "ddprun/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/integer.hpp"
#include "ddprun/error.hpp"
#include "ddprun/identity.hpp"

namespace ddprun {
namespace {

bool unset(const char* value) { return value == nullptr || *value == '\0'; }

spdlog::level::level_enum parse_level(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  using spdlog::level::level_enum;
  if (lower == "trace") return level_enum::trace;
  if (lower == "debug") return level_enum::debug;
  if (lower == "info") return level_enum::info;
  if (lower == "warn" || lower == "warning") return level_enum::warn;
  if (lower == "error") return level_enum::err;
  if (lower == "critical") return level_enum::critical;
  if (lower == "off") return level_enum::off;
  throw Error("DDPRUN_LOG_LEVEL=" + std::string(text) + " is not a level: use trace, debug, info, warn, error or off");
}

std::optional<int> parse_rank(std::string_view text) {
  auto value = common::parse_integer<int>(text);
  if (value && *value < 0) return std::nullopt;
  return value;
}

/// Whether `rank` is in DDPRUN_LOG_RANKS ("all" or "0,3,5-7").
bool rank_listed(int rank, std::string_view list) {
  if (list == "all") return true;
  auto malformed = [&] {
    return Error("DDPRUN_LOG_RANKS=" + std::string(list) +
                 " is malformed: use \"all\" or ranks and ranges like \"0,3,5-7\"");
  };
  bool listed = false;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = std::min(list.find(',', start), list.size());
    std::string_view item = list.substr(start, end - start);
    std::size_t dash = item.find('-');
    auto low = parse_rank(item.substr(0, dash));
    auto high = dash == std::string_view::npos ? low : parse_rank(item.substr(dash + 1));
    if (!low || !high || *high < *low) throw malformed();  // check every item, not only up to a match
    listed = listed || (*low <= rank && rank <= *high);
    start = end + 1;
  }
  return listed;
}

spdlog::color_mode color_mode_from_environment() {
  // https://no-color.org and the CLICOLOR_FORCE convention, as ddprun's launcher does.
  if (!unset(std::getenv("NO_COLOR"))) return spdlog::color_mode::never;
  const char* force = std::getenv("CLICOLOR_FORCE");
  if (!unset(force) && std::string_view(force) != "0") return spdlog::color_mode::always;
  return spdlog::color_mode::automatic;
}

/// Applies rank and level; a malformed setting costs one line on stderr, not the job. An unknown
/// rank shows as "?" and logs as rank 0 would, so that its messages are seen.
void apply(spdlog::logger& logger, std::optional<int> known_rank) {
  const int rank = known_rank.value_or(0);
  const std::string shown = known_rank ? std::to_string(rank) : "?";
  spdlog::level::level_enum level = spdlog::level::info;
  try {
    level = log_level_for(rank, std::getenv("DDPRUN_LOG_LEVEL"), std::getenv("DDPRUN_LOG_RANKS"));
  } catch (const Error& e) {
    std::fprintf(stderr, "[rank %s] ddprun: %s; using the defaults\n", shown.c_str(), e.what());
    level = log_level_for(rank, nullptr, nullptr);
  }
  // The rank is literal text of the pattern: formatting it per message would cost for nothing.
  logger.set_pattern("[rank " + shown + "] [%^%L%$ %H:%M:%S.%e] %v");
  logger.set_level(level);
}

std::optional<int> rank_from_environment() {
  try {
    return identity_from_environment().rank;
  } catch (const Error& e) {
    std::fprintf(stderr, "ddprun: logging as rank ?: %s\n", e.what());
    return std::nullopt;
  }
}

std::once_flag logger_once;
spdlog::logger* logger_pointer = nullptr;  // written once under logger_once, never destroyed

/// The logger, built on first use for `rank` (nothing: this process's rank from its environment).
/// Never destroyed, so that logging from static destructors still works. True in .second when
/// this call built it.
std::pair<spdlog::logger*, bool> logger_instance(std::optional<int> rank) {
  bool built = false;
  std::call_once(logger_once, [&] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(color_mode_from_environment());
    logger_pointer = new spdlog::logger("ddprun", std::move(sink));
    apply(*logger_pointer, rank ? rank : rank_from_environment());
    built = true;
  });
  return {logger_pointer, built};
}

}  // namespace

spdlog::level::level_enum log_level_for(int rank, const char* level, const char* ranks) {
  spdlog::level::level_enum chosen = unset(level) ? spdlog::level::info : parse_level(level);
  bool listed = unset(ranks) ? rank == 0 : rank_listed(rank, ranks);
  return listed ? chosen : std::max(chosen, spdlog::level::warn);
}

spdlog::logger& log() { return *logger_instance(std::nullopt).first; }

void configure_logging(int rank) {
  auto [logger, built] = logger_instance(rank);
  if (!built) apply(*logger, rank);
}

}  // namespace ddprun

#include "ddprun/logging.hpp"

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdarg>
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

spdlog::level::level_enum spdlog_level(LogLevel level) {
  switch (level) {
    case LogLevel::trace: return spdlog::level::trace;
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
    case LogLevel::critical: return spdlog::level::critical;
    case LogLevel::off: break;
  }
  return spdlog::level::off;
}

LogLevel parse_level(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "trace") return LogLevel::trace;
  if (lower == "debug") return LogLevel::debug;
  if (lower == "info") return LogLevel::info;
  if (lower == "warn" || lower == "warning") return LogLevel::warn;
  if (lower == "error") return LogLevel::error;
  if (lower == "critical") return LogLevel::critical;
  if (lower == "off") return LogLevel::off;
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

/// The level last applied (Logger::level), kept beside spdlog's own.
std::atomic<LogLevel> current_level{LogLevel::info};

/// Applies rank and level; a malformed setting costs one line on stderr, not the job. An unknown
/// rank shows as "?" and logs as rank 0 would, so that its messages are seen.
void apply(spdlog::logger& logger, std::optional<int> known_rank) {
  const int rank = known_rank.value_or(0);
  const std::string shown = known_rank ? std::to_string(rank) : "?";
  LogLevel level = LogLevel::info;
  try {
    level = log_level_for(rank, std::getenv("DDPRUN_LOG_LEVEL"), std::getenv("DDPRUN_LOG_RANKS"));
  } catch (const Error& e) {
    std::fprintf(stderr, "[rank %s] ddprun: %s; using the defaults\n", shown.c_str(), e.what());
    level = log_level_for(rank, nullptr, nullptr);
  }
  // The rank is literal text of the pattern: formatting it per message would cost for nothing.
  logger.set_pattern("[rank " + shown + "] [%^%L%$ %H:%M:%S.%e] %v");
  logger.set_level(spdlog_level(level));
  current_level.store(level, std::memory_order_relaxed);
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

/// printf's output for `format` and `args`, any length; a format vsnprintf rejects is shown as it is.
std::string format_printf(const char* format, va_list args) {
  va_list again;
  va_copy(again, args);
  char small[512];
  const int length = std::vsnprintf(small, sizeof small, format, args);
  std::string out;
  if (length < 0) {
    out = std::string("(unformattable) ") + format;
  } else if (static_cast<std::size_t>(length) < sizeof small) {
    out.assign(small, static_cast<std::size_t>(length));
  } else {
    out.resize(static_cast<std::size_t>(length));
    std::vsnprintf(out.data(), out.size() + 1, format, again);
  }
  va_end(again);
  return out;
}

/// A printf-style message at `level`, formatted only when the level is enabled.
void write_printf(const Logger& logger, LogLevel level, const char* format, va_list args) {
  if (logger.enabled(level)) logger.log(level, format_printf(format, args));
}

}  // namespace

LogLevel log_level_for(int rank, const char* level, const char* ranks) {
  LogLevel chosen = unset(level) ? LogLevel::info : parse_level(level);
  bool listed = unset(ranks) ? rank == 0 : rank_listed(rank, ranks);
  return listed ? chosen : std::max(chosen, LogLevel::warn);
}

bool Logger::enabled(LogLevel level) const {
  return level != LogLevel::off && logger_instance(std::nullopt).first->should_log(spdlog_level(level));
}

LogLevel Logger::level() const {
  logger_instance(std::nullopt);  // configured on first use, like every other call
  return current_level.load(std::memory_order_relaxed);
}

void Logger::log(LogLevel level, std::string_view message) const {
  if (!enabled(level)) return;
  logger_instance(std::nullopt).first->log(spdlog_level(level), spdlog::string_view_t(message.data(), message.size()));
}

void Logger::logf(LogLevel level, const char* format, ...) const {
  va_list args;
  va_start(args, format);
  write_printf(*this, level, format, args);
  va_end(args);
}

// The ...f form of each level: logf with the level fixed.
#define DDPRUN_LOGGER_PRINTF(name, level)            \
  void Logger::name(const char* format, ...) const { \
    va_list args;                                    \
    va_start(args, format);                          \
    write_printf(*this, level, format, args);        \
    va_end(args);                                    \
  }
DDPRUN_LOGGER_PRINTF(tracef, LogLevel::trace)
DDPRUN_LOGGER_PRINTF(debugf, LogLevel::debug)
DDPRUN_LOGGER_PRINTF(infof, LogLevel::info)
DDPRUN_LOGGER_PRINTF(warnf, LogLevel::warn)
DDPRUN_LOGGER_PRINTF(errorf, LogLevel::error)
DDPRUN_LOGGER_PRINTF(criticalf, LogLevel::critical)
#undef DDPRUN_LOGGER_PRINTF

const Logger& log() {
  static const Logger handle;
  return handle;
}

void configure_logging(int rank) {
  auto [logger, built] = logger_instance(rank);
  if (!built) apply(*logger, rank);
}

}  // namespace ddprun

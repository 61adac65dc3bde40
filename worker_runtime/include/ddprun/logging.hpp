#pragma once
/// Rank-aware logging: every line says which rank wrote it, and by default only rank 0 talks at
/// info level, so a job of 64 ranks does not print every message 64 times.
///
///   ddprun::log().infof("epoch %d loss %.4f", epoch, loss);        // printf's format, checked by the compiler
///   ddprun::log().info("resumed from " + path.string());           // or a finished message
///   -> [rank 0] [I 12:00:01.123] epoch 3 loss 0.0412      (on stderr)
///
/// This header names the standard library only: a trainer built against any LibTorch (LibTorch 2.x
/// ships its own fmt, which spdlog's fmt would clash with) includes it and calls it without fmt.
/// The work (spdlog) stays inside libddprun_runtime. A message below the rank's level costs a check
/// of the level (an atomic load): the `...f` forms format nothing then, and `enabled(level)` lets a
/// caller skip building an expensive message.
///
/// Environment (read when the logger is first used, and again by configure_logging):
///   DDPRUN_LOG_LEVEL  trace | debug | info | warn | error | off   (default: info; case-insensitive,
///                     "warning" and "critical" are accepted too)
///   DDPRUN_LOG_RANKS  which ranks log at DDPRUN_LOG_LEVEL: "all", or a comma list of ranks and
///                     ranges, e.g. "0", "0,3", "0-3,8"   (default: 0)
/// A rank in DDPRUN_LOG_RANKS logs at DDPRUN_LOG_LEVEL. Every other rank logs at the stricter of
/// warn and DDPRUN_LOG_LEVEL: warnings and errors reach the console from every rank, and
/// DDPRUN_LOG_LEVEL=error or off quiets all ranks alike. An empty variable counts as unset; a
/// malformed one is reported once on stderr and the default is used (a typo in a logging setting
/// must not stop a job).
///
/// The rank comes from the launcher's environment (ddprun::identity_from_environment); call
/// configure_logging(rank) to set it yourself. Lines go to stderr, flushed one by one, with the
/// level letter colored only when stderr is a terminal (NO_COLOR turns colors off, CLICOLOR_FORCE
/// on). The logger is ddprun's own: whatever logging library the program uses is left alone.
#include <string_view>

namespace ddprun {

/// Severity, least to most; `off` as a level logs nothing.
enum class LogLevel { trace, debug, info, warn, error, critical, off };

/// The process's ddprun logger: a handle with no state of its own (the logger behind it is built on
/// first use for this process's rank and never destroyed, so static destructors may log). Thread-safe.
class Logger {
 public:
  /// Whether a message at `level` would be written.
  bool enabled(LogLevel level) const;
  /// The level this rank logs at.
  LogLevel level() const;

  /// Writes `message` as one line when `level` is enabled.
  void log(LogLevel level, std::string_view message) const;
  void trace(std::string_view message) const { log(LogLevel::trace, message); }
  void debug(std::string_view message) const { log(LogLevel::debug, message); }
  void info(std::string_view message) const { log(LogLevel::info, message); }
  void warn(std::string_view message) const { log(LogLevel::warn, message); }
  void error(std::string_view message) const { log(LogLevel::error, message); }
  void critical(std::string_view message) const { log(LogLevel::critical, message); }

  /// printf's format and arguments; formatted only when `level` is enabled.
  void logf(LogLevel level, const char* format, ...) const __attribute__((format(printf, 3, 4)));
  void tracef(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  void debugf(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  void infof(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  void warnf(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  void errorf(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  void criticalf(const char* format, ...) const __attribute__((format(printf, 2, 3)));
};

/// The process's ddprun logger; configured for this process's rank on first use.
const Logger& log();

/// Sets the rank shown and its level (re-reading DDPRUN_LOG_LEVEL and DDPRUN_LOG_RANKS).
void configure_logging(int rank);

/// The level of `rank` when DDPRUN_LOG_LEVEL is `level` and DDPRUN_LOG_RANKS is `ranks` (nullptr or
/// empty: unset). Throws ddprun::Error naming the variable when one is malformed.
LogLevel log_level_for(int rank, const char* level, const char* ranks);

}  // namespace ddprun

#pragma once
/// Rank-aware logging on spdlog: every line says which rank wrote it, and by default only rank 0
/// talks at info level, so a job of 64 ranks does not print every message 64 times.
///
///   ddprun::log().info("epoch {} loss {:.4f}", epoch, loss);
///   -> [rank 0] [I 12:00:01.123] epoch 3 loss 0.0412      (on stderr)
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
/// on). The logger is ddprun's own: it is not registered with spdlog nor made spdlog's default.
#include <spdlog/logger.h>

namespace ddprun {

/// The process's ddprun logger; configured for this process's rank on first use. Thread-safe.
spdlog::logger& log();

/// Sets the rank shown and its level (re-reading DDPRUN_LOG_LEVEL and DDPRUN_LOG_RANKS).
void configure_logging(int rank);

/// The level of `rank` when DDPRUN_LOG_LEVEL is `level` and DDPRUN_LOG_RANKS is `ranks` (nullptr or
/// empty: unset). Throws ddprun::Error naming the variable when one is malformed.
spdlog::level::level_enum log_level_for(int rank, const char* level, const char* ranks);

}  // namespace ddprun

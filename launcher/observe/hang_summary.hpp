#pragma once
/// The failure summary of a job a hang ended (--hang-action stop, or restart with none left), in
/// the frame of torchrun's summary (failure_summary.hpp), so that it reads like the summary of any
/// failed job, with the hang as the root cause:
///
///     ============================================================
///     train.py FAILED
///     ------------------------------------------------------------
///     Root Cause: hang
///       time      : 2025-11-24_05:30:12
///       host      : node7
///       hang      : no rank made progress for 31 s (--hang-timeout 30 s)
///       action    : --hang-action stop
///       stacks    : /logs/run_x/attempt_0/stacks/rank_<rank>.txt
///       where     : rank 1: time.sleep(3600) <- train.py:41
///                   ranks 0,2,3: all_reduce <- train.py:57
///     ============================================================
///
/// Rules are as wide as the widest line, at most 60 characters. Pure.
#include <chrono>
#include <string>
#include <vector>

#include "launcher/observe/hang_action.hpp"

namespace ddprun::launcher {

struct HangReport {
  std::string program;
  std::string hang;  ///< "no rank made progress for 31 s (--hang-timeout 30 s)"
  HangAction action = HangAction::stop;
  std::chrono::system_clock::time_point time;  ///< when the hang was found
  std::string host;
  std::string stacks;               ///< where the stack files are ("<dir>/rank_<rank>.txt"); empty: none
  std::vector<std::string> digest;  ///< stack_digest's lines
};

std::string format_hang_summary(const HangReport& report);

}  // namespace ddprun::launcher

/// progress_worker: a worker that reports progress through ddprun::progress::report (the worker
/// runtime's real writer of DDPRUN_PROGRESS_FILE) at a steady rate, for the status tests and the
/// status benchmark (bench/launcher_bench.py status_cpu).
///
///   progress_worker [--rate HZ] [--seconds S] [--slow-rank R[,R...] --slow-factor F] [--print-every N]
///                   [--batch B] [--summary 1]
///
/// Reports step 1, 2, ... HZ times a second (default 100) for S seconds (default 5), with
/// samples = step * B (default 32) and the text "step N"; the ranks R (RANK) report at HZ * F instead.
/// With --print-every N it prints "rank R step N" (flushed) every N steps; with --summary 1, at the
/// end, "progress_worker rank R: N reports in S s" (the rate it kept up). Exits 0.
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ddprun/progress.hpp"

namespace {

std::int64_t now_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

void sleep_until(std::int64_t ns) {
  timespec at{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) != 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  double rate = 100;
  double seconds = 5;
  std::string slow_ranks;  ///< ",2,3,": commas around each, for a plain substring test
  double slow_factor = 1;
  long print_every = 0;
  long batch = 32;
  bool summary = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--rate") {
      rate = std::atof(value);
    } else if (flag == "--seconds") {
      seconds = std::atof(value);
    } else if (flag == "--slow-rank") {
      slow_ranks = std::string(",") + value + ",";
    } else if (flag == "--slow-factor") {
      slow_factor = std::atof(value);
    } else if (flag == "--print-every") {
      print_every = std::atol(value);
    } else if (flag == "--batch") {
      batch = std::atol(value);
    } else if (flag == "--summary") {
      summary = std::atoi(value) != 0;
    } else {
      std::fprintf(stderr, "progress_worker: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const char* rank_text = std::getenv("RANK");
  const int rank = rank_text != nullptr ? std::atoi(rank_text) : 0;
  if (slow_ranks.find("," + std::to_string(rank) + ",") != std::string::npos) rate *= slow_factor;
  if (rate <= 0) return 2;
  const std::int64_t period = static_cast<std::int64_t>(1e9 / rate);
  const std::int64_t start = now_ns();
  const std::int64_t end = start + static_cast<std::int64_t>(seconds * 1e9);
  char text[32];
  std::int64_t step = 1;
  for (;; ++step) {
    const std::int64_t due = start + step * period;
    if (due > end) break;
    sleep_until(due);
    std::snprintf(text, sizeof text, "step %lld", static_cast<long long>(step));
    ddprun::progress::report(step, step * batch, text);
    if (print_every > 0 && step % print_every == 0) {
      std::printf("rank %d step %lld\n", rank, static_cast<long long>(step));
      std::fflush(stdout);
    }
  }
  if (summary) {
    std::printf("progress_worker rank %d: %lld reports in %.3f s\n", rank, static_cast<long long>(step - 1),
                static_cast<double>(now_ns() - start) / 1e9);
  }
  return 0;
}

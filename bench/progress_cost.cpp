/// progress_cost [CALLS] [ROUNDS]: what one ddprun::progress::report call costs a worker, in ns per
/// call, against a plain call of a function of the same signature that does nothing (the anchor, in
/// the same run and the same loop). DDPRUN_PROGRESS_FILE must name a file (bench/progress_bench.py
/// makes one); the first report maps it, before the timing.
///   baseline            an empty, non-inlined function (step, samples, text)
///   unchanged           the values of the last report again: a mutex and a compare, nothing written
///   unchanged_text      the same with a text of 24 bytes (compared too)
///   changed             a new step and samples each call: the seqlock write and a coarse clock read
///   changed_text        a new step and a text of 24 bytes that changes each call
/// Prints one line per case: its name, the best round's ns per call and that minus the baseline's
/// (rounds are CALLS calls each; the best is the one least disturbed by the rest of the machine).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ddprun/progress.hpp"

namespace {

using Clock = std::chrono::steady_clock;

[[gnu::noinline]] void empty_report(std::int64_t step, std::int64_t samples, std::string_view text) {
  asm volatile("" : : "r"(step), "r"(samples), "r"(text.data()) : "memory");
}

template <class Body>
double best_ns_per_call(long calls, int rounds, Body body) {
  double best = 1e18;
  for (int round = 0; round < rounds; ++round) {
    const auto start = Clock::now();
    for (long i = 0; i < calls; ++i) body(i);
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(calls);
    best = std::min(best, ns);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 5'000'000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  if (!ddprun::progress::enabled()) {
    std::fprintf(stderr, "progress_cost: set DDPRUN_PROGRESS_FILE to a file it may create\n");
    return 2;
  }
  // Texts made before the timing: what a trainer would have at hand (a formatted string).
  const std::string text_a = "epoch 3 loss 0.123456 aa";
  const std::string text_b = "epoch 3 loss 0.123456 bb";
  const double baseline = best_ns_per_call(calls, rounds, [&](long i) { empty_report(i, i * 32, text_a); });
  struct Case {
    const char* name;
    double ns;
  };
  const Case cases[] = {
      {"baseline", baseline},
      {"unchanged", best_ns_per_call(calls, rounds, [](long) { ddprun::progress::report(7, 224); })},
      {"unchanged_text", best_ns_per_call(calls, rounds, [&](long) { ddprun::progress::report(7, 224, text_a); })},
      {"changed", best_ns_per_call(calls, rounds, [](long i) { ddprun::progress::report(i, i * 32); })},
      {"changed_text",
       best_ns_per_call(calls, rounds, [&](long i) { ddprun::progress::report(i, i * 32, i % 2 ? text_a : text_b); })},
  };
  for (const Case& c : cases) std::printf("%s %.1f %.1f\n", c.name, c.ns, c.ns - baseline);
  return 0;
}

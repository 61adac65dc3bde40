// allreduce: the ddprun side of the all-reduce benchmark (bench/allreduce_bench.py drives it; its
// PyTorch twin is bench/allreduce_torch.py, same sizes, same timing, same output).
//
//   build/bin/ddprun --standalone --nproc-per-node 2 --no-python build/bin/allreduce [options]
//
// For each size (float32 sum, gloo backend, CPU memory), every rank:
//   1. verifies one all_reduce: element i of rank r is (r+1) + i%13, so the sum is
//      n(n+1)/2 + n*(i%13) — exact in float32 — and every element is checked (exit 1 otherwise);
//   2. runs `warmup` unmeasured all_reduces of a zeroed buffer (zeros stay zeros: no inf or NaN);
//   3. times `iters` all_reduces, each started right after a barrier, with steady_clock around the
//      all_reduce call alone;
//   4. all_reduces its per-iteration times with max: an iteration takes as long as its slowest rank.
// Rank 0 reports the median over iterations of those per-iteration maxima (also mean, min, p90),
// algbw = bytes / median, busbw = algbw * 2(n-1)/n (nccl-tests' definition; GB = 1e9 bytes).
//
// Options (the same in allreduce_torch.py):
//   --min-bytes B    smallest size [4096]          --max-bytes B   largest size [268435456]
//   --factor F       sizes grow by F: 2 or 4 [4]
//   --iter-bytes B   iterations per size = iter-bytes / size, clamped to [min-iters, max-iters] [1 GiB]
//   --min-iters N [10]   --max-iters N [1000]
//   --warmup N       unmeasured iterations per size; -1 = iters/10 clamped to [2, 20] [-1]
//   --timeout-s S    the group's timeout [120]
//   --method M       barrier: as above [barrier]; loop: one barrier, then `iters` back-to-back
//                    all_reduces timed as one loop, the slowest rank's mean per operation reported
//                    (as median, mean, min and p90 alike)
//   --json PATH      rank 0 also writes the results there as JSON
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddprun/identity.hpp"
#include "ddprun/process_group.hpp"
#include "ddprun/types.hpp"

namespace {

struct Options {
  std::size_t min_bytes = 4096;
  std::size_t max_bytes = std::size_t{256} << 20;
  std::size_t factor = 4;
  std::size_t iter_bytes = std::size_t{1} << 30;
  std::size_t min_iters = 10;
  std::size_t max_iters = 1000;
  long warmup = -1;
  double timeout_s = 120;
  bool loop = false;  // --method loop: mean of one timed loop instead of per-iteration medians
  std::string json;
};

[[noreturn]] void usage(const std::string& message) {
  std::fprintf(stderr, "allreduce: %s\n", message.c_str());
  std::exit(2);
}

std::size_t parse_size(const std::string& name, const char* text) {
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0') usage(name + " wants a non-negative integer, not '" + text + "'");
  return static_cast<std::size_t>(value);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    if (i + 1 >= argc) usage(name + " needs a value");
    const char* value = argv[++i];
    if (name == "--min-bytes") options.min_bytes = parse_size(name, value);
    else if (name == "--max-bytes") options.max_bytes = parse_size(name, value);
    else if (name == "--factor") options.factor = parse_size(name, value);
    else if (name == "--iter-bytes") options.iter_bytes = parse_size(name, value);
    else if (name == "--min-iters") options.min_iters = parse_size(name, value);
    else if (name == "--max-iters") options.max_iters = parse_size(name, value);
    else if (name == "--warmup") options.warmup = std::strtol(value, nullptr, 10);
    else if (name == "--timeout-s") options.timeout_s = std::strtod(value, nullptr);
    else if (name == "--json") options.json = value;
    else if (name == "--method") {
      if (std::string(value) != "barrier" && std::string(value) != "loop") usage("--method is barrier or loop");
      options.loop = std::string(value) == "loop";
    }
    else usage("unknown option " + name);
  }
  if (options.factor != 2 && options.factor != 4) usage("--factor must be 2 or 4");
  if (options.min_bytes < 4 || options.min_bytes % 4 != 0) usage("--min-bytes must be a positive multiple of 4");
  if (options.max_bytes < options.min_bytes) usage("--max-bytes is below --min-bytes");
  if (options.min_iters < 1 || options.max_iters < options.min_iters) usage("need 1 <= --min-iters <= --max-iters");
  if (!(options.timeout_s > 0)) usage("--timeout-s must be positive");
  return options;
}

struct Result {
  std::size_t bytes = 0;
  std::size_t iters = 0;
  std::size_t warmup = 0;
  double median_s = 0, mean_s = 0, min_s = 0, p90_s = 0;
  double over_2ms = -1;  // the fraction of iterations slower than 2 ms (-1: --method loop, unknown)
  double algbw = 0, busbw = 0;  // GB/s, GB = 1e9 bytes
};

std::string human_bytes(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

/// Step 1: one all_reduce of rank-dependent values, every element checked. Throws on a mismatch,
/// so the job fails (and the benchmark with it) instead of reporting a fast wrong answer.
void verify(ddprun::ProcessGroup& group, std::vector<float>& buffer) {
  const int n = group.size();
  const float rank_part = static_cast<float>(group.rank() + 1);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = rank_part + static_cast<float>(i % 13);
  group.all_reduce(ddprun::buffer_of(buffer.data(), buffer.size()), ddprun::ReduceOp::sum);
  const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
  for (std::size_t i = 0; i < buffer.size(); ++i) {
    const float expected = ranks_sum + static_cast<float>(n) * static_cast<float>(i % 13);
    if (buffer[i] != expected) {
      throw std::runtime_error("wrong all_reduce result at rank " + std::to_string(group.rank()) + ", " +
                               human_bytes(buffer.size() * 4) + ", element " + std::to_string(i) + ": " +
                               std::to_string(buffer[i]) + " instead of " + std::to_string(expected));
    }
  }
}

Result measure(ddprun::ProcessGroup& group, const Options& options, std::size_t bytes) {
  Result result;
  result.bytes = bytes;
  result.iters = std::clamp(options.iter_bytes / bytes, options.min_iters, options.max_iters);
  result.warmup = options.warmup >= 0 ? static_cast<std::size_t>(options.warmup)
                                      : std::clamp<std::size_t>(result.iters / 10, 2, 20);
  std::vector<float> buffer(bytes / 4);  // value-initialised: every page touched before timing
  verify(group, buffer);
  std::fill(buffer.begin(), buffer.end(), 0.0f);
  const auto whole = ddprun::buffer_of(buffer.data(), buffer.size());
  for (std::size_t i = 0; i < result.warmup; ++i) group.all_reduce(whole);

  if (options.loop) {
    // One barrier, then iters back-to-back all_reduces; the slowest rank's mean per operation.
    group.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < result.iters; ++i) group.all_reduce(whole);
    double mean = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                  static_cast<double>(result.iters);
    group.all_reduce(ddprun::buffer_of(&mean, 1), ddprun::ReduceOp::max);
    result.median_s = result.mean_s = result.min_s = result.p90_s = mean;
    const int n = group.size();
    result.algbw = static_cast<double>(bytes) / mean / 1e9;
    result.busbw = result.algbw * 2.0 * (n - 1) / n;
    return result;
  }
  std::vector<double> times(result.iters);
  for (std::size_t i = 0; i < result.iters; ++i) {
    group.barrier();
    const auto start = std::chrono::steady_clock::now();
    group.all_reduce(whole);
    const auto end = std::chrono::steady_clock::now();
    times[i] = std::chrono::duration<double>(end - start).count();
  }
  group.all_reduce(ddprun::buffer_of(times.data(), times.size()), ddprun::ReduceOp::max);

  double total = 0;
  std::size_t slow = 0;
  for (double t : times) {
    total += t;
    if (t > 2e-3) ++slow;
  }
  result.over_2ms = static_cast<double>(slow) / static_cast<double>(times.size());
  result.mean_s = total / static_cast<double>(times.size());
  std::sort(times.begin(), times.end());
  const std::size_t count = times.size();
  result.median_s = count % 2 == 1 ? times[count / 2] : (times[count / 2 - 1] + times[count / 2]) / 2;
  result.min_s = times.front();
  result.p90_s = times[std::min(count - 1, static_cast<std::size_t>(0.9 * static_cast<double>(count)))];
  const int n = group.size();
  result.algbw = static_cast<double>(bytes) / result.median_s / 1e9;
  result.busbw = result.algbw * 2.0 * (n - 1) / n;
  return result;
}

void write_json(const std::string& path, int world_size, const std::string& method, const std::vector<Result>& results) {
  std::ofstream out(path);
  out << "{\"impl\": \"ddprun\", \"backend\": \"gloo\", \"world_size\": " << world_size
      << ", \"method\": \"" << method << "\", \"results\": [";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s\n  {\"bytes\": %zu, \"iters\": %zu, \"warmup\": %zu, \"median_s\": %.9g, \"mean_s\": %.9g, "
                  "\"min_s\": %.9g, \"p90_s\": %.9g, \"over_2ms\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, "
                  "\"verified\": true}",
                  i == 0 ? "" : ",", r.bytes, r.iters, r.warmup, r.median_s, r.mean_s, r.min_s, r.p90_s, r.over_2ms,
                  r.algbw, r.busbw);
    out << line;
  }
  out << "\n]}\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    ddprun::ProcessGroupOptions group_options;
    group_options.backend = ddprun::Backend::gloo;  // CPU memory, also on a machine with a GPU
    group_options.timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000));
    auto group = ddprun::ProcessGroup::create(ddprun::identity_from_environment(), group_options);
    const bool report = group->rank() == 0;
    const std::string method = options.loop ? "mean of one timed loop of back-to-back operations, slowest rank"
                                            : "median over iterations of the slowest rank's time, barrier before each";
    if (report) {
      std::printf("ddprun gloo all_reduce (float32 sum), %d ranks; time = %s\n", group->size(), method.c_str());
      std::printf("%10s %6s %12s %12s %12s %12s %12s\n", "size", "iters", "median_ms", "min_ms", "p90_ms",
                  "algbw_GB/s", "busbw_GB/s");
      std::fflush(stdout);
    }
    std::vector<Result> results;
    for (std::size_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.factor) {
      results.push_back(measure(*group, options, bytes));
      const auto& r = results.back();
      if (report) {
        std::printf("%10s %6zu %12.4f %12.4f %12.4f %12.3f %12.3f\n", human_bytes(bytes).c_str(), r.iters,
                    r.median_s * 1e3, r.min_s * 1e3, r.p90_s * 1e3, r.algbw, r.busbw);
        std::fflush(stdout);
      }
      if (bytes > options.max_bytes / options.factor) break;  // the next size would overflow or pass the max
    }
    if (report && !options.json.empty()) write_json(options.json, group->size(), method, results);
    group->barrier();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "allreduce: %s\n", error.what());
    return 1;
  }
  return 0;
}

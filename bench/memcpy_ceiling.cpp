// memcpy_ceiling: this machine's single-core memory copy bandwidth, the ceiling that the all-reduce
// benchmark (bench/allreduce_bench.py) quotes: an all-reduce on one node cannot move bytes faster
// than a core copies them.
//
//   build/bin/memcpy_ceiling [--bytes B (268435456)] [--reps N (10)] [--json PATH]
//
// One thread copies a B-byte buffer into another with memcpy, N timed times after one untimed copy
// (both buffers touched first, so no page faults are timed). Bandwidth counts read + write, 2 x B
// bytes per copy, GB = 1e9 bytes; it prints the median and the best copy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

[[noreturn]] void usage(const std::string& message) {
  std::fprintf(stderr, "memcpy_ceiling: %s\n", message.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t bytes = std::size_t{256} << 20;
  std::size_t reps = 10;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    if (i + 1 >= argc) usage(name + " needs a value");
    const char* value = argv[++i];
    if (name == "--bytes") bytes = std::strtoull(value, nullptr, 10);
    else if (name == "--reps") reps = std::strtoull(value, nullptr, 10);
    else if (name == "--json") json = value;
    else usage("unknown option " + name);
  }
  if (bytes == 0 || reps == 0) usage("--bytes and --reps must be positive");

  // 2 MiB alignment: the source and destination start on huge-page boundaries where the kernel
  // gives transparent huge pages, as large malloc'd buffers usually are.
  constexpr std::size_t kAlign = std::size_t{2} << 20;
  const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  auto* source = static_cast<char*>(std::aligned_alloc(kAlign, rounded));
  auto* destination = static_cast<char*>(std::aligned_alloc(kAlign, rounded));
  if (source == nullptr || destination == nullptr) usage("cannot allocate 2 x " + std::to_string(bytes) + " bytes");
  std::memset(source, 0x5a, bytes);
  std::memset(destination, 0, bytes);
  std::memcpy(destination, source, bytes);  // untimed

  std::vector<double> seconds(reps);
  unsigned checksum = 0;
  for (std::size_t i = 0; i < reps; ++i) {
    source[i % bytes] = static_cast<char>(i);  // each copy has something new to move
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(destination, source, bytes);
    const auto end = std::chrono::steady_clock::now();
    seconds[i] = std::chrono::duration<double>(end - start).count();
    checksum += static_cast<unsigned char>(destination[(i * 4099) % bytes]);  // the copy is used
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = reps % 2 == 1 ? seconds[reps / 2] : (seconds[reps / 2 - 1] + seconds[reps / 2]) / 2;
  const double median_gbps = 2.0 * static_cast<double>(bytes) / median / 1e9;
  const double best_gbps = 2.0 * static_cast<double>(bytes) / seconds.front() / 1e9;
  std::printf("memcpy one core, %zu bytes x %zu: median %.3f ms = %.2f GB/s, best %.2f GB/s (read+write, 2 x bytes)"
              " [checksum %u]\n",
              bytes, reps, median * 1e3, median_gbps, best_gbps, checksum);
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"bytes\": " << bytes << ", \"reps\": " << reps << ", \"median_s\": " << median
        << ", \"median_GBps\": " << median_gbps << ", \"best_GBps\": " << best_gbps
        << ", \"counts\": \"read+write: 2 x bytes per copy\"}\n";
    if (!out) usage("cannot write " + json);
  }
  std::free(source);
  std::free(destination);
  return 0;
}

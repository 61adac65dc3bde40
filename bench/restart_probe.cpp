// restart_probe: the worker of the restart-latency benchmark (bench/launcher_bench.py).
//
// Run as 8 workers under a launcher with one restart allowed:
//   attempt 0 (TORCHELASTIC_RESTART_COUNT=0): local rank 3 waits ~0.5 s so that every other worker
//     is surely up, writes its CLOCK_REALTIME (ns) to <dir>/crash.ns and exits 1; the others sleep
//     long and are expected to be terminated by the launcher.
//   attempt 1: every worker writes the time it entered main to <dir>/start.<local rank>.ns, exits 0.
// Restart latency = max(start.*.ns) - crash.ns. CLOCK_REALTIME because the stamps come from
// different processes and are compared across them (CLOCK_MONOTONIC would do too on one host).
//
// <dir> is argv[1], else $RESTART_PROBE_DIR.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace {

long long now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::atoi(v) : fallback;
}

// Writes to a temporary name and renames, so a reader never sees half a number.
bool write_stamp(const std::string& path, long long ns) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = std::fprintf(f, "%lld\n", ns) > 0;
  return (std::fclose(f) == 0) && ok && std::rename(tmp.c_str(), path.c_str()) == 0;
}

void sleep_s(double s) {
  timespec ts{static_cast<time_t>(s), static_cast<long>((s - static_cast<time_t>(s)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long long started = now_ns();  // first thing: this is what "worker is running" means

  const char* dir_c = argc > 1 ? argv[1] : std::getenv("RESTART_PROBE_DIR");
  if (dir_c == nullptr || *dir_c == '\0') {
    std::fprintf(stderr, "restart_probe: give the stamp directory as argv[1] or $RESTART_PROBE_DIR\n");
    return 2;
  }
  const std::string dir = dir_c;
  const int attempt = env_int("TORCHELASTIC_RESTART_COUNT", -1);
  const int local_rank = env_int("LOCAL_RANK", -1);
  if (attempt < 0 || local_rank < 0) {
    std::fprintf(stderr, "restart_probe: TORCHELASTIC_RESTART_COUNT and LOCAL_RANK must be set\n");
    return 2;
  }

  if (attempt == 0) {
    if (local_rank == 3) {
      sleep_s(0.5);
      if (!write_stamp(dir + "/crash.ns", now_ns())) return 2;
      return 1;  // the crash the launcher must react to
    }
    sleep_s(300);  // the launcher terminates us long before this
    return 0;
  }

  if (!write_stamp(dir + "/start." + std::to_string(local_rank) + ".ns", started)) return 2;
  return 0;
}

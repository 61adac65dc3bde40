/// store_client_latency: what one store operation costs a worker through the blocking StoreClient
/// (the client of the gloo store adapter and of torch's store), against a running ddprun-store.
/// Each op kind runs --ops times in a row on one connection, after a warm-up; every call is timed.
/// One line per op kind: median, p90 and p99 in microseconds. Compare two clients by building this
/// file against each and running both against the same store binary, alternating runs.
///
///   store_client_latency --port P [--host 127.0.0.1] [--ops 20000] [--rounds 3]
///
/// Ops: SET, GET (WAIT then GET: two round trips), ADD, CHECK, COMPARE_SET, WAIT (the key exists),
/// MULTI_GET of 4 keys (WAIT then MULTI_GET), GETNUMKEYS, PING. Values are 16 bytes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "rendezvous/store_client.hpp"

namespace rdzv = ddprun::rendezvous;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  int ops = 20000;
  int rounds = 3;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string name = argv[i];
    std::string value = argv[i + 1];
    if (name == "--host") o.host = value;
    else if (name == "--port") o.port = std::stoi(value);
    else if (name == "--ops") o.ops = std::stoi(value);
    else if (name == "--rounds") o.rounds = std::stoi(value);
    else {
      std::fprintf(stderr, "store_client_latency: unknown option %s\n", name.c_str());
      std::exit(2);
    }
  }
  if (o.port <= 0) {
    std::fprintf(stderr, "usage: store_client_latency --port P [--host H] [--ops N] [--rounds R]\n");
    std::exit(2);
  }
  return o;
}

double percentile(std::vector<double>& xs, double q) {
  std::size_t k = static_cast<std::size_t>(q * static_cast<double>(xs.size() - 1) + 0.5);
  std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(k), xs.end());
  return xs[k];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  rdzv::StoreClientOptions options;
  options.host = o.host;
  options.port = o.port;
  rdzv::StoreClient client(options);

  const std::string value(16, 'v');
  const std::vector<std::string> four = {"k0", "k1", "k2", "k3"};
  client.multi_set(four, {value, value, value, value});
  client.set("cas", value);

  struct Kind {
    const char* name;
    std::function<void()> op;
  };
  const std::vector<Kind> kinds = {
      {"SET", [&] { client.set("k0", value); }},
      {"GET", [&] { client.get("k0"); }},
      {"ADD", [&] { client.add("counter", 1); }},
      {"CHECK", [&] { client.check({"k0"}); }},
      {"COMPARE_SET", [&] { client.compare_set("cas", value, value); }},
      {"WAIT", [&] { client.wait({"k0"}); }},
      {"MULTI_GET4", [&] { client.multi_get(four); }},
      {"GETNUMKEYS", [&] { client.num_keys(); }},
      {"PING", [&] { client.ping(); }},
  };

  for (int round = 0; round < o.rounds; ++round) {
    for (const Kind& kind : kinds) {
      for (int i = 0; i < o.ops / 10; ++i) kind.op();  // warm-up
      std::vector<double> us;
      us.reserve(static_cast<std::size_t>(o.ops));
      for (int i = 0; i < o.ops; ++i) {
        const auto start = Clock::now();
        kind.op();
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
      const double p50 = percentile(us, 0.50);
      const double p90 = percentile(us, 0.90);
      const double p99 = percentile(us, 0.99);
      std::printf("round %d  %-12s p50 %7.2f us  p90 %7.2f us  p99 %7.2f us\n", round, kind.name, p50, p90, p99);
    }
  }
  return 0;
}

/// plain_sgd: data-parallel linear regression with hand-written SGD on ddprun::runtime (no LibTorch),
/// which checks its own result, so that a wrong all-reduce cannot pass.
///
/// Every rank generates the same synthetic data set (a seeded generator: features uniform in
/// [-1, 1], targets from known weights plus small noise). Each epoch, a DistributedSampler (shuffled,
/// the same seed on every rank) hands this rank its indices; each step takes this rank's next
/// global_batch / world_size of them, sums the squared-error gradient over them, all-reduces the sums
/// (ReduceOp::sum, gloo) and divides by the global batch. Because the sampler gives rank k the
/// positions k, k + W, k + 2W, ... of the epoch's order, the samples of global step s are exactly
/// positions [s*B, (s+1)*B) of that order, whatever the world size W.
///
/// At the end every rank replays the same training as one process (a sampler with one replica, the
/// same global batch, no collectives) and compares the weights:
///   max_rel_diff = max_j |w[j] - w_ref[j]| / max_j |w_ref[j]|   (the bias counted as a weight)
/// must be <= 1e-9. The math is float64; the only difference allowed is the order in which the
/// all-reduce adds the ranks' partial sums (about 1e-16 relative per step), while a missing, doubled
/// or misplaced contribution moves the weights by far more: training stops well before convergence
/// (4 epochs at lr 0.1), where the trajectory still depends on every gradient.
///
/// `--step-delay-ms N` (default 0) sleeps N ms after each step's all-reduce (not in the one-process
/// replay), so that a run lasts several seconds without burning CPU: tests kill nodes mid-run.
/// `--stall-rank R` (default -1: none) makes rank R say so on stderr and sleep `--stall-seconds S`
/// (default 3600) in its first step, before the all-reduce, so that the other ranks wait inside it:
/// a hang, for tests of ddprun's --hang-timeout (the stall happens in `stall`, a function of its
/// own, so stacks name it).
///
/// Output (rank 0): `final_loss=<mean squared error over the data set> max_rel_diff=<...>`; exit
/// status 0 when within the tolerance, 1 when not (every rank checks), 2 on a usage error.
///
///   build/bin/ddprun --nproc-per-node 3 build/bin/plain_sgd
///   mpirun --allow-run-as-root --oversubscribe -np 2 build/bin/plain_sgd
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ddprun/identity.hpp"
#include "ddprun/process_group.hpp"
#include "ddprun/sampler.hpp"

namespace {

constexpr double kTolerance = 1e-9;

struct Settings {
  std::int64_t samples = 3840;  // 16 global batches of 240: divisible by world sizes 1-6, 8, 10, 12, 15, 16
  int features = 16;
  std::int64_t global_batch = 240;
  int epochs = 4;
  double learning_rate = 0.1;
  std::uint64_t seed = 20240601;
  std::int64_t step_delay_ms = 0;  // a pause after each step's all-reduce, to make a run last
  int stall_rank = -1;              // this rank sleeps stall_seconds before its first all-reduce
  std::int64_t stall_seconds = 3600;
};

/// A rank that stops taking part: sleeps, while the others wait for it in the all-reduce. Not
/// inlined, so that a stack shows where the rank stands.
[[gnu::noinline]] void stall(int rank, std::int64_t seconds) {
  std::fprintf(stderr, "plain_sgd: rank %d stalls for %lld s (--stall-rank)\n", rank, static_cast<long long>(seconds));
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
}

/// y = x . true_weights + true_bias + noise, rows of `features` values.
struct DataSet {
  std::vector<double> x;
  std::vector<double> y;
  int features = 0;
  std::span<const double> row(std::int64_t i) const {
    return {x.data() + i * features, static_cast<std::size_t>(features)};
  }
};

/// splitmix64: tiny, seedable, and the same on every platform, so every rank builds the same data.
class Generator {
 public:
  explicit Generator(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform(double low, double high) { return low + (high - low) * static_cast<double>(next() >> 11) * 0x1p-53; }

 private:
  std::uint64_t state_;
};

DataSet make_data(const Settings& settings) {
  DataSet data;
  data.features = settings.features;
  std::vector<double> true_weights(static_cast<std::size_t>(settings.features));
  for (int j = 0; j < settings.features; ++j) true_weights[j] = (j % 2 == 0 ? 1.0 : -1.0) * (0.5 + 0.1 * j);
  const double true_bias = 0.3;
  Generator generator(settings.seed);
  data.x.resize(static_cast<std::size_t>(settings.samples * settings.features));
  data.y.resize(static_cast<std::size_t>(settings.samples));
  for (std::int64_t i = 0; i < settings.samples; ++i) {
    double target = true_bias + generator.uniform(-0.01, 0.01);
    for (int j = 0; j < settings.features; ++j) {
      double value = generator.uniform(-1.0, 1.0);
      data.x[i * settings.features + j] = value;
      target += value * true_weights[j];
    }
    data.y[i] = target;
  }
  return data;
}

/// weights[0..features) and the bias at weights[features].
double predict(const std::vector<double>& weights, std::span<const double> row) {
  double value = weights.back();
  for (std::size_t j = 0; j < row.size(); ++j) value += weights[j] * row[j];
  return value;
}

double mean_squared_error(const DataSet& data, const std::vector<double>& weights) {
  double total = 0.0;
  for (std::size_t i = 0; i < data.y.size(); ++i) {
    double error = predict(weights, data.row(static_cast<std::int64_t>(i))) - data.y[i];
    total += error * error;
  }
  return total / static_cast<double>(data.y.size());
}

/// Trains from zero weights with `sampler`'s share of every global batch; `sum_over_ranks` turns
/// this rank's gradient sums into the sums over all ranks (in place).
std::vector<double> train(const Settings& settings, const DataSet& data, ddprun::DistributedSampler& sampler,
                          const std::function<void(std::vector<double>&)>& sum_over_ranks) {
  const std::int64_t local_batch = settings.global_batch / sampler.num_replicas();
  const std::int64_t steps = settings.samples / settings.global_batch;
  std::vector<double> weights(static_cast<std::size_t>(settings.features + 1), 0.0);
  std::vector<double> gradient(weights.size());
  for (int epoch = 0; epoch < settings.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    const std::vector<std::int64_t> indices = sampler.indices();
    for (std::int64_t step = 0; step < steps; ++step) {
      std::fill(gradient.begin(), gradient.end(), 0.0);
      for (std::int64_t k = step * local_batch; k < (step + 1) * local_batch; ++k) {
        auto row = data.row(indices[static_cast<std::size_t>(k)]);
        double error = predict(weights, row) - data.y[static_cast<std::size_t>(indices[static_cast<std::size_t>(k)])];
        for (int j = 0; j < settings.features; ++j) gradient[j] += error * row[j];
        gradient.back() += error;
      }
      sum_over_ranks(gradient);
      for (std::size_t j = 0; j < weights.size(); ++j) {
        weights[j] -= settings.learning_rate * gradient[j] / static_cast<double>(settings.global_batch);
      }
    }
  }
  return weights;
}

double max_relative_difference(const std::vector<double>& weights, const std::vector<double>& reference) {
  double largest = 0.0;
  double scale = 0.0;
  for (std::size_t j = 0; j < weights.size(); ++j) {
    largest = std::max(largest, std::fabs(weights[j] - reference[j]));
    scale = std::max(scale, std::fabs(reference[j]));
  }
  return scale > 0.0 ? largest / scale : largest;
}

/// --name value pairs; anything else is a usage error.
Settings parse(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("missing value after " + std::string(flag));
    std::string value = argv[++i];
    if (flag == "--samples") settings.samples = std::stoll(value);
    else if (flag == "--features") settings.features = std::stoi(value);
    else if (flag == "--global-batch") settings.global_batch = std::stoll(value);
    else if (flag == "--epochs") settings.epochs = std::stoi(value);
    else if (flag == "--lr") settings.learning_rate = std::stod(value);
    else if (flag == "--seed") settings.seed = std::stoull(value);
    else if (flag == "--step-delay-ms") settings.step_delay_ms = std::stoll(value);
    else if (flag == "--stall-rank") settings.stall_rank = std::stoi(value);
    else if (flag == "--stall-seconds") settings.stall_seconds = std::stoll(value);
    else throw std::invalid_argument("unknown flag " + std::string(flag));
  }
  if (settings.samples <= 0 || settings.features <= 0 || settings.global_batch <= 0 || settings.epochs < 0 ||
      settings.step_delay_ms < 0 || settings.stall_seconds < 0) {
    throw std::invalid_argument("--samples, --features and --global-batch must be positive, --epochs, "
                                "--step-delay-ms and --stall-seconds >= 0");
  }
  return settings;
}

/// The one-process reference must see exactly the same global batches: no padding by the sampler
/// (which would count some samples twice) and no partial batch.
void check_partition(const Settings& settings, int world_size) {
  if (settings.samples % settings.global_batch != 0 || settings.global_batch % world_size != 0) {
    throw std::invalid_argument("the global batch (" + std::to_string(settings.global_batch) +
                                ") must divide the samples (" + std::to_string(settings.samples) +
                                ") and be divisible by the world size (" + std::to_string(world_size) +
                                "); choose --samples and --global-batch accordingly");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  ddprun::Identity identity;
  try {
    settings = parse(argc, argv);
    identity = ddprun::identity_from_environment();
    check_partition(settings, identity.world_size);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "plain_sgd: %s\nusage: plain_sgd [--samples N] [--features D] [--global-batch B] "
                         "[--epochs E] [--lr RATE] [--seed S] [--step-delay-ms N] [--stall-rank R] "
                         "[--stall-seconds S]\n", error.what());
    return 2;
  }
  try {
    const DataSet data = make_data(settings);
    const ddprun::SamplerOptions sampling{.shuffle = true, .seed = settings.seed, .drop_last = false};

    ddprun::ProcessGroupOptions options;
    options.backend = ddprun::Backend::gloo;  // host memory
    auto group = ddprun::ProcessGroup::create(identity, options);
    ddprun::DistributedSampler sampler(settings.samples, group->size(), group->rank(), sampling);
    bool stalled = false;
    std::vector<double> weights = train(settings, data, sampler, [&](std::vector<double>& sums) {
      if (group->rank() == settings.stall_rank && !std::exchange(stalled, true)) stall(group->rank(), settings.stall_seconds);
      group->all_reduce(ddprun::buffer_of(sums.data(), sums.size()), ddprun::ReduceOp::sum);
      if (settings.step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(settings.step_delay_ms));
    });

    ddprun::DistributedSampler one_process(settings.samples, 1, 0, sampling);
    std::vector<double> reference = train(settings, data, one_process, [](std::vector<double>&) {});

    const double difference = max_relative_difference(weights, reference);
    const bool same = difference <= kTolerance;  // also false for NaN
    if (group->rank() == 0 || !same) {
      std::printf("plain_sgd: rank %d of %d, %lld samples x %d features, global batch %lld, %d epochs, lr %g\n",
                  group->rank(), group->size(), static_cast<long long>(settings.samples), settings.features,
                  static_cast<long long>(settings.global_batch), settings.epochs, settings.learning_rate);
      std::printf("final_loss=%.9g max_rel_diff=%.3g (tolerance %.0e against one process, same global batch)\n",
                  mean_squared_error(data, weights), difference, kTolerance);
      std::printf(same ? "plain_sgd: OK\n" : "plain_sgd: MISMATCH: the distributed weights differ from one process's\n");
      std::fflush(stdout);
    }
    group->barrier();  // rank 0 may host the store: nobody leaves while another still needs it
    return same ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "plain_sgd: rank %d: %s\n", identity.rank, error.what());
    return 1;
  }
}

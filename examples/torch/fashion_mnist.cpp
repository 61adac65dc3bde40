/// fashion_mnist: data-parallel training of a small CNN (fashion_cnn.hpp) on Fashion-MNIST with
/// ddprun::torch::DistributedDataParallel: the job that scripts/demo.sh runs.
///
///   build/bin/ddprun --standalone --nproc-per-node 2 build/bin/fashion_mnist [flags]   (--help lists them)
///
/// What it does, as PyTorch's DDP tutorials teach it:
///   - every rank reads the gzipped IDX files of Debian's dataset-fashion-mnist (--data-dir) and
///     normalizes them; a ddprun::DistributedSampler (shuffled, the same seed everywhere, set_epoch
///     every epoch) gives each rank its share; --batch-size is per rank, so a step trains on
///     batch-size x world-size images;
///   - Adam (--lr), cross-entropy, --threads intra-op threads per rank (1 by default);
///   - after every epoch, rank 0 saves a checkpoint (model, optimizer, epoch, step, every rank's RNG)
///     atomically to <--checkpoint-dir>/checkpoint.pt, and the test accuracy is computed: each rank
///     scores its strided share of the test set, and the counts are all-reduced;
///   - at start, when that checkpoint exists (after a restart by `--max-restarts`, say), training
///     resumes from it; since the RNG states come back too, the resumed job computes what an
///     uninterrupted one does;
///   - rank 0 prints a progress line every --log-every steps (loss, samples/s over all ranks), every
///     rank publishes ddprun::progress::report each step, and at the end rank 0 prints
///       train_samples_per_s=<all ranks' training samples / training seconds> train_cpu_ms_per_sample=<...>
///       ddp_allreduce_s=<...> ddp_wait_s=<...> ddp_hidden_share=<...>
///       test_accuracy=<value>            (always the last line)
///
/// The default checkpoint folder is <temp dir>/ddprun-fashion-mnist/<TORCHELASTIC_RUN_ID>: restarts of
/// a job share it, a new --standalone job gets a new one. (Without --standalone and --rdzv-id the run
/// id is "none", so a later job resumes an earlier one's checkpoint; pass --checkpoint-dir.)
///
/// For tests: --train-limit/--test-limit N use the first N images; --die-at-step K makes rank
/// --die-rank (1) SIGKILL itself right after its K-th optimizer step, on the first attempt only.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <cstdint>
#include <cstdarg>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "ddprun/error_report.hpp"
#include "ddprun/logging.hpp"
#include "ddprun/progress.hpp"
#include "ddprun/sampler.hpp"
#include "ddprun/torch/checkpoint.hpp"
#include "ddprun/torch/ddp.hpp"
#include "ddprun/torch/tensor_buffer.hpp"
#include "fashion_cnn.hpp"
#include "fashion_data.hpp"
#include "worker_setup.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  fs::path data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 2;
  std::int64_t batch_size = 64;
  double lr = 2e-3;
  int threads = 1;
  std::uint64_t seed = 7;
  std::int64_t train_limit = 0;  // 0 or less: all
  std::int64_t test_limit = 0;
  fs::path checkpoint_dir;  // empty: the default, per run id
  int log_every = 100;
  double bucket_cap_mb = 25;
  std::int64_t die_at_step = -1;
  int die_rank = 1;
};

void define_flags(CLI::App& app, Options& options) {
  app.add_option("--data-dir", options.data_dir, "folder of the gzipped IDX files")->capture_default_str();
  app.add_option("--epochs", options.epochs, "epochs to train")->capture_default_str()->check(CLI::Range(0, 100000));
  app.add_option("--batch-size", options.batch_size, "images per step and rank")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--lr", options.lr, "Adam's learning rate")->capture_default_str()->check(CLI::Range(1e-9, 1e3));
  app.add_option("--threads", options.threads, "intra-op threads per rank (torch::set_num_threads)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--seed", options.seed, "seed of the weights, dropout and the sampler's shuffle")
      ->capture_default_str();
  app.add_option("--train-limit", options.train_limit, "use only the first N training images (0: all)")
      ->capture_default_str();
  app.add_option("--test-limit", options.test_limit, "use only the first N test images (0: all)")
      ->capture_default_str();
  app.add_option("--checkpoint-dir", options.checkpoint_dir,
                 "where checkpoint.pt is saved every epoch and resumed from "
                 "(default: <temp dir>/ddprun-fashion-mnist/<run id>)");
  app.add_option("--log-every", options.log_every, "steps between rank 0's progress lines (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--bucket-cap-mb", options.bucket_cap_mb,
                 "gradient bucket size of DistributedDataParallel (caps the first bucket too)")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 1e6));
  app.add_option("--die-at-step", options.die_at_step,
                 "test: rank --die-rank SIGKILLs itself after its K-th step, on the first attempt only");
  app.add_option("--die-rank", options.die_rank, "test: the rank that --die-at-step kills")->capture_default_str();
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// CPU time of this process, all threads (LibTorch's, the process group's), in seconds.
double process_cpu_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

/// printf for one line on stdout, written at once (ddprun and torchrun forward lines as they come).
/// printf, not fmt: LibTorch 2.x ships its own fmt, and a trainer should not have to pick one.
__attribute__((format(printf, 1, 2))) void say(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

long long ll(std::int64_t value) { return static_cast<long long>(value); }  // for printf's %lld

/// Collective: the test accuracy over all ranks. Each rank scores images rank, rank + world, ...
/// (no padding, so every image counts once), then (correct, count) are summed over the ranks.
double test_accuracy(fashion::FashionCNN& model, const fashion::Split& test, examples::Worker& worker) {
  torch::NoGradGuard no_grad;
  model->eval();
  const torch::Tensor index = torch::arange(worker.rank(), test.size(), worker.world_size(), torch::kInt64);
  const torch::Tensor images = test.images.index_select(0, index);
  const torch::Tensor labels = test.labels.index_select(0, index);
  std::int64_t correct = 0;
  for (std::int64_t begin = 0; begin < images.size(0); begin += 1000) {
    const std::int64_t end = std::min(begin + 1000, images.size(0));
    const torch::Tensor logits = model->forward(images.slice(0, begin, end).to(worker.device));
    correct += logits.argmax(1).eq(labels.slice(0, begin, end).to(worker.device)).sum().item<std::int64_t>();
  }
  model->train();
  torch::Tensor counts = torch::tensor({correct, images.size(0)}, torch::kInt64).to(worker.device);
  worker.group->all_reduce(ddprun::torch::buffer_of(counts), ddprun::ReduceOp::sum);
  counts = counts.cpu();
  const auto total = counts[1].item<std::int64_t>();
  return total > 0 ? static_cast<double>(counts[0].item<std::int64_t>()) / static_cast<double>(total) : 0.0;
}

int run(const Options& options) {
  torch::set_num_threads(options.threads);
  examples::Worker worker = examples::join_job();
  const int rank = worker.rank();
  const int world = worker.world_size();
  const bool leader = rank == 0;
  const ddprun::Logger& log = ddprun::log();

  const Clock::time_point load_start = Clock::now();
  const fashion::Split train = fashion::load_split(options.data_dir, fashion::Part::train,
                                                      options.train_limit > 0 ? options.train_limit : -1);
  const fashion::Split test = fashion::load_split(options.data_dir, fashion::Part::test,
                                                     options.test_limit > 0 ? options.test_limit : -1);
  log.infof("Fashion-MNIST from %s: %lld training and %lld test images, read in %.1f s", options.data_dir.c_str(),
            ll(train.size()), ll(test.size()), seconds_since(load_start));

  torch::manual_seed(options.seed);
  fashion::FashionCNN model;
  model->to(worker.device);
  ddprun::torch::DdpOptions ddp_options;
  ddp_options.bucket_cap_bytes = static_cast<std::size_t>(options.bucket_cap_mb * 1024 * 1024);
  // The first bucket's cap (1 MiB) holds all of this small model: smaller caps apply to it too.
  ddp_options.first_bucket_cap_bytes = std::min(ddp_options.first_bucket_cap_bytes, ddp_options.bucket_cap_bytes);
  ddprun::torch::DistributedDataParallel ddp(model, *worker.group, ddp_options);
  torch::optim::Adam optimizer(ddp.parameters(), torch::optim::AdamOptions(options.lr));

  const fs::path checkpoint_dir = !options.checkpoint_dir.empty()
                                      ? options.checkpoint_dir
                                      : fs::temp_directory_path() / "ddprun-fashion-mnist" / worker.identity.run_id;
  const fs::path checkpoint = checkpoint_dir / "checkpoint.pt";
  ddprun::torch::CheckpointState state;
  if (auto resumed = ddprun::torch::load_checkpoint(checkpoint, *model, &optimizer, worker.device, rank)) {
    state = *resumed;
    log.infof("attempt %d: resumed from %s: %lld of %d epochs done, step %lld", worker.attempt(), checkpoint.c_str(),
              ll(state.epoch), options.epochs, ll(state.step));
  } else if (worker.attempt() > 0) {
    log.infof("attempt %d: no checkpoint in %s yet, starting from scratch", worker.attempt(), checkpoint_dir.c_str());
  }
  std::int64_t samples = state.values.count("samples") != 0 ? state.values.at("samples") : 0;  // this rank's

  ddprun::DistributedSampler sampler(train.size(), world, rank, {.shuffle = true, .seed = options.seed});
  const std::int64_t steps_per_epoch = (sampler.size() + options.batch_size - 1) / options.batch_size;
  if (leader && state.epoch < options.epochs) {
    say("training epochs %lld-%d of %d on %d ranks: %lld images per rank and epoch, batch %lld per rank, %lld steps per epoch",
        ll(state.epoch + 1), options.epochs, options.epochs, world, ll(sampler.size()), ll(options.batch_size),
        ll(steps_per_epoch));
  }

  const ddprun::torch::DdpStats stats_before = ddp.stats();
  double train_seconds = 0;
  double train_cpu_seconds = 0;  // this rank's
  std::int64_t trained = 0;  // all ranks' samples
  double accuracy = -1;
  for (std::int64_t epoch = state.epoch; epoch < options.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    const std::vector<std::int64_t> indices = sampler.indices();
    worker.group->barrier();
    const Clock::time_point epoch_start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    Clock::time_point window_start = epoch_start;
    std::int64_t window_samples = 0;
    double loss_sum = 0;
    for (std::int64_t step = 0; step < steps_per_epoch; ++step) {
      const std::int64_t begin = step * options.batch_size;
      const std::int64_t count = std::min(options.batch_size, sampler.size() - begin);
      const torch::Tensor index =
          torch::from_blob(const_cast<std::int64_t*>(indices.data() + begin), {count}, torch::kInt64);
      const torch::Tensor images = train.images.index_select(0, index).to(worker.device);
      const torch::Tensor labels = train.labels.index_select(0, index).to(worker.device);

      optimizer.zero_grad();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(ddp(images), labels);
      loss.backward();  // returns with the gradients averaged over the ranks
      optimizer.step();

      ++state.step;
      samples += count;
      trained += count * world;
      window_samples += count * world;
      const double loss_value = loss.item<double>();
      loss_sum += loss_value;
      char progress_text[64];
      std::snprintf(progress_text, sizeof progress_text, "epoch %lld/%d loss %.4f", ll(epoch + 1), options.epochs, loss_value);
      ddprun::progress::report(state.step, samples, progress_text);

      if (state.step == options.die_at_step && rank == options.die_rank && worker.attempt() == 0) {
        log.warnf("--die-at-step %lld: rank %d kills itself with SIGKILL", ll(options.die_at_step), rank);
        std::raise(SIGKILL);
      }
      if (leader && options.log_every > 0 && (step + 1) % options.log_every == 0) {
        say("epoch %lld/%d step %lld/%lld loss %.4f %.0f samples/s", ll(epoch + 1), options.epochs, ll(step + 1),
            ll(steps_per_epoch), loss_value, static_cast<double>(window_samples) / seconds_since(window_start));
        window_start = Clock::now();
        window_samples = 0;
      }
    }
    worker.group->barrier();
    const double epoch_seconds = seconds_since(epoch_start);
    train_seconds += epoch_seconds;
    train_cpu_seconds += process_cpu_seconds() - cpu_start;

    state.epoch = epoch + 1;
    state.sampler_epoch = epoch + 1;
    state.values["samples"] = samples;
    ddprun::torch::save_checkpoint(checkpoint, *model, &optimizer, state, *worker.group);
    accuracy = test_accuracy(model, test, worker);
    if (leader) {
      say("epoch %lld/%d done in %.1f s: mean loss %.4f, test accuracy %.4f; checkpoint %s", ll(epoch + 1),
          options.epochs, epoch_seconds, loss_sum / static_cast<double>(std::max<std::int64_t>(steps_per_epoch, 1)),
          accuracy, checkpoint.c_str());
    }
  }
  if (accuracy < 0) accuracy = test_accuracy(model, test, worker);  // nothing left to train

  // Every rank's CPU time in the training loops, summed: a cost per sample that other load on the
  // machine disturbs less than samples/s.
  torch::Tensor cpu = torch::tensor({train_cpu_seconds}, torch::kFloat64).to(worker.device);
  worker.group->all_reduce(ddprun::torch::buffer_of(cpu), ddprun::ReduceOp::sum);
  if (leader) {
    if (trained > 0) {
      const ddprun::torch::DdpStats after = ddp.stats();
      ddprun::torch::DdpStats delta;  // this attempt's
      delta.all_reduce_seconds = after.all_reduce_seconds - stats_before.all_reduce_seconds;
      delta.wait_seconds = after.wait_seconds - stats_before.wait_seconds;
      say("train_samples_per_s=%.1f train_cpu_ms_per_sample=%.4f", static_cast<double>(trained) / train_seconds,
          cpu.cpu().item<double>() * 1e3 / static_cast<double>(trained));
      say("ddp_allreduce_s=%.3f ddp_wait_s=%.3f ddp_hidden_share=%.3f", delta.all_reduce_seconds, delta.wait_seconds,
          delta.hidden_share());
    }
    say("test_accuracy=%.4f", accuracy);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ddprun::install_error_handlers();
  Options options;
  CLI::App app{"Data-parallel training of a small CNN on Fashion-MNIST with ddprun::torch (run it under ddprun)"};
  define_flags(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  }
  try {
    return run(options);
  } catch (const std::exception& error) {
    ddprun::record_exception(error);
    std::fprintf(stderr, "fashion_mnist: %s\n", error.what());
    return 1;
  }
}

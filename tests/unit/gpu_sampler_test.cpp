// GpuSampler against the stand-in NVML: a sample comes back through the io_context; a driver
// call that sleeps forever makes the sample come back stalled by its deadline while the loop's
// 10 ms timer stays on time, later requests are answered at once, and the sampler recovers (and
// says so) when the call returns; destroying it while a call is stuck returns at once; NVML that
// cannot be loaded or initialised answers unavailable with the reason; latest wins.
//
// Loop lateness is the one timing checked: a blocked loop is late by the whole stall (1.5 s here,
// or forever), so the bound (250 ms) tells blocked from not blocked on a loaded machine.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "launcher/gpu/gpu_sampler.hpp"
#include "scratch_folder.hpp"

#ifndef NVML_STANDIN_LIBRARY
#error "NVML_STANDIN_LIBRARY: the path of the stand-in libnvidia-ml.so.1 (tests/unit/CMakeLists.txt)"
#endif

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing_support::ScratchFolder;

constexpr const char* kTwoGpus =
    "gpu 0 uuid=GPU-aaaa1111-0000-0000-0000-000000000000 util=87 mem_total=85899345920 mem_used=42949672960 temp=71\n"
    "gpu 1 uuid=GPU-bbbb2222-0000-0000-0000-000000000000 util=12 mem_total=85899345920 mem_used=1073741824 temp=40\n";

/// The stand-in's control file, named by DDPRUN_NVML_STANDIN, written whole (rename) so that the
/// sampler's thread, which reads it at every call, never sees half a file.
class Standin {
 public:
  explicit Standin(const std::string& lines) : folder_("gpu_sampler") {
    control_ = (folder_.root() / "control").string();
    ::setenv("DDPRUN_NVML_STANDIN", control_.c_str(), 1);
    answer(lines);
  }
  ~Standin() { ::unsetenv("DDPRUN_NVML_STANDIN"); }
  void answer(const std::string& lines) const {
    const std::string next = control_ + ".next";
    if (FILE* file = std::fopen(next.c_str(), "w")) {
      std::fputs(lines.c_str(), file);
      std::fclose(file);
    }
    std::filesystem::rename(next, control_);
  }

 private:
  ScratchFolder folder_;
  std::string control_;
};

/// Rewrites the control file without the stall after `delay`, unless stopped first (its destructor
/// stops it): a stall ends even when the test returned early or a broken sampler holds the loop.
std::jthread release_after(const Standin& standin, std::chrono::milliseconds delay) {
  return std::jthread([&standin, delay](std::stop_token stop) {
    std::mutex mutex;
    std::condition_variable_any stopped;
    std::unique_lock lock(mutex);
    if (!stopped.wait_for(lock, stop, delay, [] { return false; })) standin.answer(kTwoGpus);
  });
}

GpuSamplerSettings settings(std::chrono::milliseconds deadline = 2000ms) {
  GpuSamplerSettings s;
  s.library_path = NVML_STANDIN_LIBRARY;
  s.deadline = deadline;
  s.first_deadline = 10s;
  return s;
}

/// Runs the loop until `done()` or `limit`.
template <typename Pred>
bool run_until(boost::asio::io_context& io, Pred done, std::chrono::milliseconds limit = 10000ms) {
  const auto end = Clock::now() + limit;
  while (!done() && Clock::now() < end) {
    io.restart();
    io.run_one_for(10ms);
  }
  return done();
}

/// A 10 ms timer on the loop that records how late it fires at worst.
class Lateness {
 public:
  explicit Lateness(boost::asio::io_context& io) : timer_(io) { arm(); }
  ~Lateness() { timer_.cancel(); }
  std::chrono::milliseconds worst() const { return std::chrono::duration_cast<std::chrono::milliseconds>(worst_); }

 private:
  void arm() {
    due_ = Clock::now() + 10ms;
    timer_.expires_at(due_);
    timer_.async_wait([this, life = std::weak_ptr<int>(life_)](const boost::system::error_code& error) {
      if (error || life.expired()) return;
      worst_ = std::max(worst_, Clock::now() - due_);
      arm();
    });
  }
  boost::asio::steady_timer timer_;
  Clock::time_point due_;
  Clock::duration worst_{0};
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

/// Asks for a sample and runs the loop until it is answered.
std::optional<GpuSampleResult> sample_now(boost::asio::io_context& io, GpuSampler& sampler,
                                          std::optional<std::vector<unsigned int>> indices) {
  std::optional<GpuSampleResult> got;
  sampler.sample(std::move(indices), [&](GpuSampleResult result) { got = std::move(result); });
  run_until(io, [&] { return got.has_value(); });
  return got;
}

TEST(GpuSampler, ASampleComesBackThroughTheLoop) {
  Standin standin(kTwoGpus);
  boost::asio::io_context io;
  GpuSampler sampler(io, settings());
  auto result = sample_now(io, sampler, std::vector<unsigned int>{1, 0});
  ASSERT_TRUE(result);
  EXPECT_EQ(gpu_sample_problem(*result), std::nullopt);
  ASSERT_EQ(result->gpus.size(), 2u);
  EXPECT_EQ(result->gpus[0].identity.uuid, "GPU-bbbb2222-0000-0000-0000-000000000000");
  EXPECT_EQ(result->gpus[0].utilisation_percent.value, 12u);
  EXPECT_EQ(result->gpus[1].utilisation_percent.value, 87u);
  ASSERT_TRUE(result->gpus[1].memory.known());
  EXPECT_EQ(result->gpus[1].memory.value->used_bytes, 42949672960ULL);
  EXPECT_EQ(result->gpus[1].temperature_c.value, 71u);
  EXPECT_GT(result->took.count(), 0);

  auto all = sample_now(io, sampler, std::nullopt);  // every GPU NVML counts
  ASSERT_TRUE(all);
  ASSERT_EQ(all->gpus.size(), 2u);
  EXPECT_EQ(all->gpus[0].identity.index, 0u);
  EXPECT_FALSE(sampler.stalled());
}

TEST(GpuSampler, AStuckCallIsAnsweredByTheDeadlineWithoutBlockingTheLoop) {
  Standin standin(kTwoGpus);
  boost::asio::io_context io;
  std::vector<GpuSamplerRecovery> recoveries;
  const auto deadline = 300ms;
  GpuSampler sampler(io, settings(deadline), [&](const GpuSamplerRecovery& r) { recoveries.push_back(r); });
  ASSERT_TRUE(sample_now(io, sampler, std::vector<unsigned int>{0}));  // NVML started, first deadline over

  Lateness lateness(io);
  standin.answer(std::string(kTwoGpus) + "sleep nvmlDeviceGetUtilizationRates forever\n");
  // The driver answers again 1.5 s from now, whatever the loop does (a blocked loop could not).
  auto release = release_after(standin, 1500ms);

  auto stalled = sample_now(io, sampler, std::vector<unsigned int>{0, 1});
  ASSERT_TRUE(stalled);
  EXPECT_TRUE(stalled->stalled);
  EXPECT_EQ(stalled->stalled_call, "nvmlDeviceGetUtilizationRates");
  EXPECT_TRUE(stalled->gpus.empty());
  EXPECT_GT(stalled->stalled_for, deadline / 2);  // the call began after the request reached the thread
  EXPECT_GE(stalled->took, deadline);
  EXPECT_LT(stalled->took, deadline + 250ms);
  EXPECT_TRUE(sampler.stalled());
  ASSERT_TRUE(gpu_sample_problem(*stalled));
  EXPECT_NE(gpu_sample_problem(*stalled)->find("nvmlDeviceGetUtilizationRates has not returned"), std::string::npos);

  // While stalled: answered at once, as stalled, and nothing else is asked of the stuck driver.
  auto again = sample_now(io, sampler, std::vector<unsigned int>{1});
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->stalled);
  EXPECT_EQ(again->stalled_call, "nvmlDeviceGetUtilizationRates");
  EXPECT_GE(again->stalled_for, stalled->stalled_for);  // the same call, stuck for longer
  EXPECT_LT(again->took, 50ms);

  // The call returns: the sampler says so once, and samples again.
  ASSERT_TRUE(run_until(io, [&] { return !recoveries.empty(); }, 5000ms));
  EXPECT_FALSE(sampler.stalled());
  ASSERT_EQ(recoveries.size(), 1u);
  EXPECT_EQ(recoveries[0].call, "nvmlDeviceGetUtilizationRates");
  EXPECT_GE(recoveries[0].stuck_for, 1000ms);
  auto after = sample_now(io, sampler, std::vector<unsigned int>{0});
  ASSERT_TRUE(after);
  EXPECT_EQ(gpu_sample_problem(*after), std::nullopt);
  EXPECT_EQ(after->gpus.at(0).utilisation_percent.value, 87u);
  EXPECT_EQ(recoveries.size(), 1u);

  EXPECT_LT(lateness.worst(), 250ms) << "the loop was blocked";
  std::printf("[ measured ] worst lateness of a 10 ms timer on the loop: %lld ms; stalled answer after %lld ms\n",
              static_cast<long long>(lateness.worst().count()),
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(stalled->took).count()));
}

/// Destroys the sampler on another thread, so that a destructor that blocks fails the test (and is
/// let go by releasing the stand-in) instead of hanging it. How long it took, or nothing.
std::optional<std::chrono::milliseconds> destroy(std::unique_ptr<GpuSampler>& sampler, const Standin& standin) {
  const auto start = Clock::now();
  auto gone = std::async(std::launch::async, [&] { sampler.reset(); });
  if (gone.wait_for(2s) != std::future_status::ready) {
    standin.answer(kTwoGpus);
    gone.wait();
    return std::nullopt;
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

TEST(GpuSampler, DestroyingItWhileACallIsStuckReturnsAtOnce) {
  Standin standin(kTwoGpus);
  boost::asio::io_context io;
  auto sampler = std::make_unique<GpuSampler>(io, settings(200ms));
  ASSERT_TRUE(sample_now(io, *sampler, std::vector<unsigned int>{0}));
  standin.answer(std::string(kTwoGpus) + "sleep nvmlDeviceGetUtilizationRates forever\n");
  auto watchdog = release_after(standin, 5000ms);
  auto stalled = sample_now(io, *sampler, std::vector<unsigned int>{0});
  ASSERT_TRUE(stalled && stalled->stalled);

  // A request answered (its handler posted) just before the sampler goes: the handler must not run.
  bool late_handler_ran = false;
  sampler->sample(std::vector<unsigned int>{0}, [&](GpuSampleResult) { late_handler_ran = true; });
  auto took = destroy(sampler, standin);
  ASSERT_TRUE(took) << "the destructor blocked on the stuck thread";
  EXPECT_LT(*took, 100ms);
  std::printf("[ measured ] destructor with a call stuck: %lld ms\n", static_cast<long long>(took->count()));
  io.restart();
  io.poll();
  EXPECT_FALSE(late_handler_ran);

  // Let the left thread's call return, so that it ends before the next test changes the environment.
  standin.answer(kTwoGpus);
  std::this_thread::sleep_for(100ms);
}

TEST(GpuSampler, DestroyingItWhileInitIsStuckReturnsAtOnce) {
  Standin standin(std::string(kTwoGpus) + "sleep nvmlInit_v2 forever\n");
  boost::asio::io_context io;
  auto watchdog = release_after(standin, 5000ms);
  auto s = settings();
  s.first_deadline = 200ms;
  auto sampler = std::make_unique<GpuSampler>(io, s);
  auto stalled = sample_now(io, *sampler, std::vector<unsigned int>{0});
  ASSERT_TRUE(stalled);
  EXPECT_TRUE(stalled->stalled);
  EXPECT_EQ(stalled->stalled_call, "nvmlInit_v2");
  auto took = destroy(sampler, standin);
  ASSERT_TRUE(took) << "the destructor blocked on the thread stuck in nvmlInit_v2";
  EXPECT_LT(*took, 100ms);
  standin.answer(kTwoGpus);
  std::this_thread::sleep_for(100ms);
}

TEST(GpuSampler, DestroyingItIdleJoinsItsThread) {
  Standin standin(kTwoGpus);
  boost::asio::io_context io;
  auto sampler = std::make_unique<GpuSampler>(io, settings());
  ASSERT_TRUE(sample_now(io, *sampler, std::vector<unsigned int>{0}));
  auto took = destroy(sampler, standin);
  ASSERT_TRUE(took);
  EXPECT_LT(*took, 100ms);
}

TEST(GpuSampler, NvmlThatCannotBeLoadedIsUnavailableWithTheReason) {
  Standin standin(kTwoGpus);
  boost::asio::io_context io;
  auto s = settings();
  s.library_path = "/nonexistent/libnvidia-ml.so.1";
  GpuSampler sampler(io, s);
  auto result = sample_now(io, sampler, std::vector<unsigned int>{0});
  ASSERT_TRUE(result);
  ASSERT_TRUE(result->unavailable);
  EXPECT_NE(result->unavailable->find("LIBRARY_NOT_FOUND"), std::string::npos) << *result->unavailable;
  EXPECT_NE(result->unavailable->find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << *result->unavailable;
  EXPECT_EQ(gpu_sample_problem(*result), "NVML unavailable: " + *result->unavailable);
  ASSERT_TRUE(sampler.unavailable());
  auto again = sample_now(io, sampler, std::vector<unsigned int>{0});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->unavailable, result->unavailable);
  EXPECT_LT(again->took, 50ms);
}

TEST(GpuSampler, NvmlThatCannotInitialiseIsUnavailableWithTheReason) {
  Standin standin(std::string(kTwoGpus) + "init_error DRIVER_NOT_LOADED\n");
  boost::asio::io_context io;
  GpuSampler sampler(io, settings());
  auto result = sample_now(io, sampler, std::vector<unsigned int>{0});
  ASSERT_TRUE(result);
  ASSERT_TRUE(result->unavailable);
  EXPECT_EQ(result->unavailable->rfind("nvmlInit_v2: DRIVER_NOT_LOADED", 0), 0u) << *result->unavailable;
}

TEST(GpuSampler, TheLatestRequestWins) {
  Standin standin(kTwoGpus);
  boost::asio::io_context io;
  GpuSampler sampler(io, settings(5000ms));
  ASSERT_TRUE(sample_now(io, sampler, std::vector<unsigned int>{0}));
  standin.answer(std::string(kTwoGpus) + "sleep nvmlDeviceGetUtilizationRates 300\n");

  std::vector<std::string> order;
  std::optional<GpuSampleResult> first, second, third;
  sampler.sample(std::vector<unsigned int>{0}, [&](GpuSampleResult r) { order.push_back("first"); first = std::move(r); });
  sampler.sample(std::vector<unsigned int>{0}, [&](GpuSampleResult r) { order.push_back("second"); second = std::move(r); });
  sampler.sample(std::vector<unsigned int>{1}, [&](GpuSampleResult r) { order.push_back("third"); third = std::move(r); });
  ASSERT_TRUE(run_until(io, [&] { return first && second && third; }));

  EXPECT_EQ(order, (std::vector<std::string>{"second", "first", "third"}));
  EXPECT_TRUE(second->superseded);
  EXPECT_TRUE(second->gpus.empty());
  EXPECT_EQ(gpu_sample_problem(*second), "NVML sample superseded by a later request");
  EXPECT_EQ(gpu_sample_problem(*first), std::nullopt);
  ASSERT_EQ(first->gpus.size(), 1u);
  EXPECT_EQ(first->gpus[0].identity.index, 0u);
  EXPECT_EQ(gpu_sample_problem(*third), std::nullopt);
  ASSERT_EQ(third->gpus.size(), 1u);
  EXPECT_EQ(third->gpus[0].identity.index, 1u);  // the latest request's GPUs, not the replaced one's
}

TEST(GpuSampleProblem, TheLineForEachKindOfAnswer) {
  GpuSampleResult fine;
  EXPECT_EQ(gpu_sample_problem(fine), std::nullopt);
  GpuSampleResult stalled;
  stalled.stalled = true;
  stalled.stalled_call = "nvmlDeviceGetUtilizationRates";
  stalled.stalled_for = 2049ms;
  EXPECT_EQ(gpu_sample_problem(stalled), "NVML stalled: nvmlDeviceGetUtilizationRates has not returned for 2.0 s");
  stalled.stalled_call.clear();
  EXPECT_EQ(gpu_sample_problem(stalled), "NVML stalled: no answer for 2.0 s");
  GpuSampleResult unavailable;
  unavailable.unavailable = "LIBRARY_NOT_FOUND: libnvidia-ml.so.1: cannot open shared object file";
  EXPECT_EQ(gpu_sample_problem(unavailable),
            "NVML unavailable: LIBRARY_NOT_FOUND: libnvidia-ml.so.1: cannot open shared object file");
  GpuSampleResult count;
  count.count_error = "nvmlDeviceGetCount_v2: NO_PERMISSION: Insufficient Permissions";
  EXPECT_EQ(gpu_sample_problem(count), "NVML cannot count the GPUs: nvmlDeviceGetCount_v2: NO_PERMISSION: Insufficient Permissions");
}

}  // namespace
}  // namespace ddprun::launcher

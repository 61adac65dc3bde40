// StatusWatch on a real loop, watching real child processes (`sleep`) with progress files written
// as common/progress_layout.hpp lays them out: no monitor (no sampling) until a reader wants
// samples, then one sample at once; every sample to the listeners in the order they were added; a
// straggler named once (an event and a line) until it catches up; and no sample forced for an
// attempt whose workers are gone.
#include "launcher/observe/status_watch.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "common/progress_layout.hpp"
#include "launcher/observe/event_recorder.hpp"
#include "launcher/observe/status_monitor.hpp"
#include "observer_rig.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace layout = common::progress_layout;
using namespace std::chrono_literals;
using testing_support::NullConsole;
using testing_support::run_until;
using testing_support::ScratchFolder;
using testing_support::SleepChild;

/// A worker's side of a progress file, as the contract says: mapped shared, fields published
/// under the seqlock (the runtime's writer does the same; the launcher does not link it).
class ProgressWriter {
 public:
  explicit ProgressWriter(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    EXPECT_GE(fd_, 0) << path;
    EXPECT_EQ(::ftruncate(fd_, layout::kFileSize), 0);
    void* memory = ::mmap(nullptr, layout::kFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    EXPECT_NE(memory, MAP_FAILED);
    record_ = static_cast<layout::Record*>(memory);
    record_->version = layout::kVersion;
    record_->size = layout::kFileSize;
    record_->pid = static_cast<std::int32_t>(::getpid());
    std::atomic_ref<std::uint64_t>(record_->magic).store(layout::kMagic, std::memory_order_release);
  }
  ~ProgressWriter() {
    ::munmap(record_, layout::kFileSize);
    ::close(fd_);
  }
  ProgressWriter(const ProgressWriter&) = delete;
  ProgressWriter& operator=(const ProgressWriter&) = delete;

  void publish(std::int64_t step) {
    std::atomic_ref<std::uint64_t> sequence(record_->sequence);
    sequence.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    std::atomic_ref<std::int64_t>(record_->step).store(step, std::memory_order_relaxed);
    std::atomic_ref<std::int64_t>(record_->samples).store(step * 32, std::memory_order_relaxed);
    std::atomic_ref<std::int64_t>(record_->timestamp_ns)
        .store(static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec, std::memory_order_relaxed);
    std::atomic_ref<std::uint32_t>(record_->text_length).store(0, std::memory_order_relaxed);
    sequence.fetch_add(1, std::memory_order_release);
  }

 private:
  int fd_ = -1;
  layout::Record* record_ = nullptr;
};

struct Collected : JobEventSink {
  void record(const JobEvent& event) override { events.push_back(event); }
  std::vector<JobEvent> events;
};

class Watch : public ::testing::Test {
 protected:
  /// A watch of `children` as local ranks 0.., with `progress_files` (one per child, or none).
  StatusWatch& make(StatusWatchSettings settings, std::vector<pid_t> children, std::vector<std::string> progress_files = {}) {
    children_ = std::move(children);
    progress_files_ = std::move(progress_files);
    settings.nproc_per_node = static_cast<int>(children_.size());
    settings.host = "testhost";
    watch_ = std::make_unique<StatusWatch>(io_, console_.writer(), settings, attempt_, events_,
                                           [this](std::vector<WorkerView>& views) {
                                             for (std::size_t i = 0; i < children_.size(); ++i) {
                                               WorkerView view;
                                               view.local_rank = static_cast<int>(i);
                                               view.pid = children_[i];
                                               if (i < progress_files_.size()) view.progress_file = progress_files_[i];
                                               views.push_back(view);
                                             }
                                           });
    return *watch_;
  }

  boost::asio::io_context io_;
  NullConsole console_{io_};
  AttemptView attempt_;
  Collected sink_;
  EventRecorder events_{io_, JobFacts{}, attempt_, [](const std::string&) {}};
  std::vector<pid_t> children_;
  std::vector<std::string> progress_files_;
  std::unique_ptr<StatusWatch> watch_;
};

StatusWatchSettings nothing_reads() {
  StatusWatchSettings settings;
  settings.block = false;  // and no --status-interval, no hang timeout, no status port
  return settings;
}

TEST_F(Watch, NoMonitorUntilAReaderWantsSamplesThenOneSampleAtOnce) {
  SleepChild child;
  StatusWatch& watch = make(nothing_reads(), {child.pid()});
  std::vector<NodeStatus> seen;
  watch.add_listener([&](const NodeStatus& node) { seen.push_back(node); });
  attempt_.rank_base = 4;
  attempt_.attempt = 2;
  watch.attempt_started();
  EXPECT_EQ(watch.monitor(), nullptr);
  EXPECT_TRUE(watch.latest().ranks.empty());
  io_.run_for(50ms);  // nothing samples by itself
  EXPECT_TRUE(seen.empty());

  watch.ensure_samples();
  ASSERT_NE(watch.monitor(), nullptr);
  ASSERT_EQ(seen.size(), 1u);  // now, not a second later
  ASSERT_EQ(seen[0].ranks.size(), 1u);
  EXPECT_EQ(seen[0].ranks[0].pid, child.pid());
  EXPECT_EQ(seen[0].ranks[0].rank, 4);
  EXPECT_EQ(seen[0].ranks[0].state, RankState::running);
  EXPECT_EQ(seen[0].attempt, 2);
  EXPECT_EQ(seen[0].host, "testhost");
  EXPECT_EQ(watch.latest().ranks.at(0).pid, child.pid());

  // Asked again right after a sample: the sample is fresh, none is taken.
  watch.ensure_samples();
  EXPECT_EQ(seen.size(), 1u);
}

TEST_F(Watch, AReaderFromTheStartHasAMonitorFromTheStart) {
  StatusWatchSettings settings = nothing_reads();
  settings.samples_wanted = true;
  StatusWatch& watch = make(settings, {});
  EXPECT_NE(watch.monitor(), nullptr);
}

TEST_F(Watch, ListenersGetEverySampleInTheOrderAdded) {
  SleepChild child;
  StatusWatchSettings settings = nothing_reads();
  settings.samples_wanted = true;
  StatusWatch& watch = make(settings, {child.pid()});
  std::vector<std::string> calls;
  watch.add_listener([&](const NodeStatus& node) {
    calls.push_back("first");
    ASSERT_EQ(node.ranks.size(), 1u);
    EXPECT_EQ(node.ranks[0].pid, child.pid());
  });
  watch.add_listener([&](const NodeStatus& node) {
    calls.push_back("second");
    ASSERT_EQ(node.ranks.size(), 1u);
    EXPECT_EQ(node.ranks[0].pid, child.pid());
  });
  watch.attempt_started();
  watch.monitor()->sample_now();
  EXPECT_EQ(calls, (std::vector<std::string>{"first", "second"}));
  // The monitor's own samples (once a second) go the same way.
  ASSERT_TRUE(run_until(io_, [&] { return calls.size() >= 4; }));
  EXPECT_EQ(calls[2], "first");
  EXPECT_EQ(calls[3], "second");
}

TEST_F(Watch, NoSampleIsForcedForAnAttemptWhoseWorkersAreGone) {
  SleepChild child;
  StatusWatchSettings settings = nothing_reads();
  settings.samples_wanted = true;
  StatusWatch& watch = make(settings, {child.pid()});
  int samples = 0;
  watch.add_listener([&](const NodeStatus&) { ++samples; });

  watch.ensure_samples();  // no attempt started yet
  EXPECT_EQ(samples, 0);
  watch.attempt_started();
  watch.attempt_ended();
  watch.ensure_samples();  // no sample yet, but the attempt's workers are gone
  EXPECT_EQ(samples, 0);
  watch.attempt_started();
  watch.ensure_samples();  // a running attempt without a sample: one now
  EXPECT_EQ(samples, 1);
}

TEST_F(Watch, AStragglerIsNamedOnceUntilItCatchesUp) {
  ScratchFolder dir("status_watch");
  SleepChild child0, child1, child2;
  std::vector<std::string> files;
  for (int i = 0; i < 3; ++i) files.push_back((dir.root() / ("progress_" + std::to_string(i))).string());
  std::vector<std::unique_ptr<ProgressWriter>> writers;
  for (const std::string& file : files) writers.push_back(std::make_unique<ProgressWriter>(file));
  std::vector<std::int64_t> steps{0, 0, 0};
  auto publish = [&] {
    for (std::size_t i = 0; i < 3; ++i) writers[i]->publish(steps[i]);
  };

  StatusWatchSettings settings = nothing_reads();
  settings.samples_wanted = true;
  attempt_.rank_base = 10;
  StatusWatch& watch = make(settings, {child0.pid(), child1.pid(), child2.pid()}, files);
  events_.add_sink(&sink_);
  watch.attempt_started();
  auto stragglers = [&] {
    int named = 0;
    for (const JobEvent& event : sink_.events) named += event.kind == JobEventKind::straggler ? 1 : 0;
    return named;
  };

  ::testing::internal::CaptureStderr();
  publish();
  watch.monitor()->sample_now();
  // A rate needs samples two seconds apart (rate_window.hpp): let the loop (and its own samples) run that long.
  bool waited = false;
  boost::asio::steady_timer two_seconds(io_, 2100ms);
  two_seconds.async_wait([&](const boost::system::error_code&) { waited = true; });
  ASSERT_TRUE(run_until(io_, [&] { return waited; }));

  // Rank 12 (local 2) makes a tenth of the others' steps: named after the rule's samples in a row.
  int samples = 0;
  for (; samples < 40 && stragglers() == 0; ++samples) {
    steps[0] += 100;
    steps[1] += 100;
    steps[2] += 10;
    publish();
    watch.monitor()->sample_now();
  }
  ASSERT_EQ(stragglers(), 1) << "after " << samples << " samples";
  EXPECT_TRUE(watch.latest().ranks.at(2).straggler);
  // Still behind: not named again.
  for (int i = 0; i < 10; ++i) {
    steps[0] += 100;
    steps[1] += 100;
    steps[2] += 10;
    publish();
    watch.monitor()->sample_now();
  }
  EXPECT_EQ(stragglers(), 1);

  // It catches up: no longer a straggler, and named again once it falls behind again.
  steps[2] = steps[0];
  publish();
  watch.monitor()->sample_now();
  EXPECT_FALSE(watch.latest().ranks.at(2).straggler);
  EXPECT_EQ(stragglers(), 1);
  for (samples = 0; samples < 40 && stragglers() == 1; ++samples) {
    steps[0] += 1000;
    steps[1] += 1000;
    publish();
    watch.monitor()->sample_now();
  }
  const std::string printed = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(stragglers(), 2) << "after " << samples << " samples";

  const JobEvent* named = nullptr;
  for (const JobEvent& event : sink_.events) {
    if (event.kind == JobEventKind::straggler) named = named ? named : &event;
  }
  ASSERT_NE(named, nullptr);
  EXPECT_EQ(named->rank, 12);
  EXPECT_EQ(named->pid, child2.pid());
  EXPECT_LT(named->detail["steps_per_second"].get<double>(), named->detail["median_steps_per_second"].get<double>());
  std::size_t lines = 0;
  for (std::size_t at = printed.find("rank 12 is a straggler"); at != std::string::npos;
       at = printed.find("rank 12 is a straggler", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 2u) << printed;
  EXPECT_NE(printed.find("the median of this node's ranks"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("rank 10 is a straggler"), std::string::npos) << printed;
}

}  // namespace
}  // namespace ddprun::launcher

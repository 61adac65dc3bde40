// EventLog (--events FILE) against real files, pipes, FIFOs and /dev/full: it never blocks, keeps
// the order, bounds its queue (drops counted, said once), says a failed write once; and the ring
// of recent events the status endpoint reads.
#include "launcher/observe/event_log.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/base/errors.hpp"
#include "launcher/observe/recent_events.hpp"
#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

using testing_support::ScratchFolder;

JobEvent numbered(int n) {
  JobEvent event;
  event.time = 1700000000.0 + n;
  event.kind = JobEventKind::worker_started;
  event.rank = n;
  event.pid = 1000 + n;
  event.detail = {{"local_rank", n}, {"attempt", 0}, {"padding", std::string(80, 'x')}};
  return event;
}

/// The ranks of the events in `text`'s lines, in order; every line must be a whole event.
std::vector<int> ranks_of(const std::string& text) {
  std::vector<int> ranks;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) ranks.push_back(job_event_from_json(nlohmann::json::parse(line)).rank);
  return ranks;
}

std::vector<int> range(int first, int end) {
  std::vector<int> numbers;
  for (int n = first; n < end; ++n) numbers.push_back(n);
  return numbers;
}

/// Reads what is in the pipe now.
std::string read_available(int fd) {
  std::string text;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

class EventLogFile : public ::testing::Test {
 protected:
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }

  /// A pipe whose write end the log reopens through /proc (as --events /dev/fd/N would), made
  /// as small as Linux allows (one page), and whose read end the test reads without waiting.
  void make_pipe() {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    read_end_ = fds[0];
    write_end_ = fds[1];
    ASSERT_GE(::fcntl(read_end_, F_SETPIPE_SZ, 4096), 4096);
  }
  void TearDown() override {
    if (read_end_ >= 0) ::close(read_end_);
    if (write_end_ >= 0) ::close(write_end_);
  }
  std::string pipe_path() const { return "/proc/self/fd/" + std::to_string(write_end_); }
  EventLog::Warn collect() {
    return [this](const std::string& line) { warnings_.push_back(line); };
  }

  boost::asio::io_context io_;
  int read_end_ = -1;
  int write_end_ = -1;
  std::vector<std::string> warnings_;
};

TEST_F(EventLogFile, ARegularFileGetsOneWholeLinePerEventAtOnceAndIsAppendedTo) {
  ScratchFolder folder("event_log");
  const std::string path = (folder.root() / "events.jsonl").string();
  std::ofstream(path) << "{\"time\":1,\"event\":\"job_started\"}\n";  // a previous run's
  {
    EventLog log(io_, path, collect());
    for (int n = 0; n < 3; ++n) {
      log.record(numbered(n));
      // tail -f sees each event as it is recorded: nothing waits in the process.
      std::ifstream in(path);
      std::string text((std::istreambuf_iterator<char>(in)), {});
      EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), n + 2);
    }
    EXPECT_EQ(log.queued(), 0u);
  }
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "{\"time\":1,\"event\":\"job_started\"}");
  std::string rest((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(ranks_of(rest), range(0, 3));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(EventLogFile, AFullPipeQueuesEventsAndWritesThemInOrderWhenItIsRead) {
  make_pipe();
  EventLog log(io_, pipe_path(), collect());
  constexpr int kEvents = 200;  // ~40 KiB, ten times what the pipe holds
  const auto start = std::chrono::steady_clock::now();
  for (int n = 0; n < kEvents; ++n) log.record(numbered(n));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "record() waited for the reader";
  EXPECT_GT(log.queued(), 0u);

  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::count(text.begin(), text.end(), '\n') < kEvents && std::chrono::steady_clock::now() < deadline) {
    text += read_available(read_end_);
    io_.run_for(std::chrono::milliseconds(10));  // the log writes when the pipe has room again
  }
  EXPECT_EQ(ranks_of(text), range(0, kEvents));
  EXPECT_EQ(log.dropped(), 0u);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(EventLogFile, PastTheBoundEventsAreDroppedCountedAndSaidOnceAndWhatWasKeptIsWhole) {
  make_pipe();
  constexpr std::size_t kLimit = 2000;
  constexpr int kEvents = 300;
  {
    EventLog log(io_, pipe_path(), collect(), kLimit);
    for (int n = 0; n < kEvents; ++n) log.record(numbered(n));
    EXPECT_GT(log.dropped(), 0u);
    EXPECT_LE(log.queued(), kLimit + 200);  // the bound, and at most one line begun before it
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("events are dropped"), std::string::npos) << warnings_[0];

    // The reader catches up: the queue goes out, and later events are written again.
    std::string text;
    for (int i = 0; i < 200 && log.queued() > 0; ++i) {
      text += read_available(read_end_);
      io_.run_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(log.queued(), 0u);
    log.record(numbered(kEvents));
    text += read_available(read_end_);
    std::vector<int> ranks = ranks_of(text);  // whole lines only, or this throws
    ASSERT_GE(ranks.size(), 2u);
    EXPECT_EQ(ranks.front(), 0);
    EXPECT_EQ(ranks.back(), kEvents);
    EXPECT_TRUE(std::is_sorted(ranks.begin(), ranks.end()));
    EXPECT_EQ(ranks.size() - 1 + log.dropped(), static_cast<std::size_t>(kEvents));
    EXPECT_EQ(warnings_.size(), 1u) << "said once";
  }
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_NE(warnings_[1].find("event(s) were not written"), std::string::npos) << warnings_[1];
}

TEST_F(EventLogFile, AFifoWithoutAReaderOpensAtOnceAndItsReaderGetsTheEventsFromTheStart) {
  ScratchFolder folder("event_log");
  const std::string path = (folder.root() / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  ::alarm(20);  // an open that waited for a reader would hang here: fail instead
  EventLog log(io_, path, collect());
  ::alarm(0);
  for (int n = 0; n < 3; ++n) log.record(numbered(n));
  int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  EXPECT_EQ(ranks_of(read_available(reader)), range(0, 3));
  log.record(numbered(3));
  EXPECT_EQ(ranks_of(read_available(reader)), range(3, 4));
  ::close(reader);
  EXPECT_TRUE(warnings_.empty());
}

// Issue 25: the events in a FIFO's pipe lived as long as ddprun's own read-write descriptor; at the
// end they went with it. when_drained now waits (its patience) for a reader to take them.
TEST_F(EventLogFile, AtTheEndAFifoWaitsForALateReaderWhoGetsEveryEvent) {
  ScratchFolder folder("event_log");
  const std::string path = (folder.root() / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  std::string text;
  bool done = false;
  {
    EventLog log(io_, path, collect());
    for (int n = 0; n < 3; ++n) log.record(numbered(n));
    log.when_drained([&] { done = true; }, std::chrono::seconds(60));
    io_.run_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(done) << "no reader yet: the events would be lost";
    int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // late, after the job's end
    ASSERT_GE(reader, 0);
    for (int i = 0; i < 2000 && !done; ++i) {
      text += read_available(reader);
      io_.run_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(done) << "drained by the late reader, long before the patience";
    log.record(numbered(3));  // an event after the wait: the reader is there, it gets it too
    text += read_available(reader);
    ::close(reader);
  }
  EXPECT_EQ(ranks_of(text), range(0, 4));
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
}

TEST_F(EventLogFile, AtTheEndAFifoNobodyOpensGivesUpAfterThePatienceAndSaysHowManyEventsWereLost) {
  ScratchFolder folder("event_log");
  const std::string path = (folder.root() / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  {
    EventLog log(io_, path, collect());
    for (int n = 0; n < 3; ++n) log.record(numbered(n));
    bool done = false;
    log.when_drained([&] { done = true; }, std::chrono::milliseconds(300));
    const auto start = std::chrono::steady_clock::now();
    while (!done && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
      io_.run_one_for(std::chrono::seconds(1));
    }
    EXPECT_TRUE(done);
    EXPECT_TRUE(warnings_.empty()) << "said once, as ddprun ends";
  }
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_EQ(warnings_[0], "warning: no reader took the last 3 event(s) of the event log " + path +
                              " (a FIFO) within 300 ms; they are lost");
}

// Ended without the end's wait (a second Ctrl-C): the events no reader took are said lost all the same.
TEST_F(EventLogFile, AFifoNobodyReadEndedWithoutTheWaitSaysItsEventsWereLost) {
  ScratchFolder folder("event_log");
  const std::string path = (folder.root() / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  {
    EventLog log(io_, path, collect());
    for (int n = 0; n < 2; ++n) log.record(numbered(n));
  }
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_EQ(warnings_[0], "warning: no reader took the last 2 event(s) of the event log " + path +
                              " (a FIFO); they are lost");
}

// A reader that came during the job and took everything: nothing to wait for at the end.
TEST_F(EventLogFile, AtTheEndAFifoWhoseReaderTookEverythingIsDrainedAtOnce) {
  ScratchFolder folder("event_log");
  const std::string path = (folder.root() / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EventLog log(io_, path, collect());
  log.record(numbered(0));
  int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  EXPECT_EQ(ranks_of(read_available(reader)), range(0, 1));
  bool done = false;
  log.when_drained([&] { done = true; }, std::chrono::seconds(60));
  io_.run_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(done);
  ::close(reader);
}

TEST_F(EventLogFile, AFullDiskIsSaidOnceNamingTheFileAndNothingMoreIsWritten) {
  EventLog log(io_, "/dev/full", collect());
  for (int n = 0; n < 5; ++n) log.record(numbered(n));
  EXPECT_TRUE(log.failed());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_EQ(warnings_[0], "warning: cannot write the event log /dev/full: No space left on device; the job goes on without it");
}

TEST_F(EventLogFile, AReaderThatWentAwayIsSaidOnce) {
  make_pipe();
  ::close(std::exchange(read_end_, -1));
  EventLog log(io_, pipe_path(), collect());
  log.record(numbered(0));
  log.record(numbered(1));
  EXPECT_TRUE(log.failed());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("Broken pipe"), std::string::npos) << warnings_[0];
}

TEST_F(EventLogFile, WhenDrainedWaitsForTheQueueOrGivesUpAfterItsPatience) {
  make_pipe();
  EventLog log(io_, pipe_path(), collect());
  for (int n = 0; n < 100; ++n) log.record(numbered(n));
  ASSERT_GT(log.queued(), 0u);
  bool done = false;
  log.when_drained([&] { done = true; }, std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  while (!done && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    io_.run_one_for(std::chrono::seconds(1));  // nobody reads: the patience ends it
  }
  EXPECT_TRUE(done);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));

  done = false;
  io_.restart();
  log.when_drained([&] { done = true; }, std::chrono::seconds(60));
  for (int i = 0; i < 500 && !done; ++i) {
    read_available(read_end_);
    io_.run_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(done) << "drained by the reader, long before the patience";
}

TEST(EventLogOpen, WhatCannotBeAnEventLogIsRefusedNamingThePath) {
  boost::asio::io_context io;
  ScratchFolder folder("event_log");
  struct Case {
    std::string path;
    std::string why;
  };
  const Case cases[] = {
      {(folder.root() / "missing" / "events.jsonl").string(), "No such file or directory"},
      {folder.root().string(), "Is a directory"},
  };
  for (const auto& c : cases) {
    try {
      EventLog log(io, c.path, nullptr);
      ADD_FAILURE() << c.path << " was opened";
    } catch (const LaunchError& error) {
      EXPECT_EQ(std::string(error.what()), "cannot open the event log " + c.path + " (--events): " + c.why);
    }
  }
}

TEST(RecentEvents, KeepsTheLastEventsAndTellsAReaderWhatItHasNotSeen) {
  RecentEvents ring(3);
  for (int n = 0; n < 5; ++n) ring.record(numbered(n));
  EXPECT_EQ(ring.recorded(), 5u);
  ASSERT_EQ(ring.events().size(), 3u);
  EXPECT_EQ(ring.events().front().rank, 2);
  struct Case {
    std::uint64_t first;
    std::vector<int> ranks;
  };
  const Case cases[] = {{0, {2, 3, 4}}, {2, {2, 3, 4}}, {3, {3, 4}}, {4, {4}}, {5, {}}, {9, {}}};
  for (const auto& c : cases) {
    std::vector<int> ranks;
    for (const JobEvent& event : ring.since(c.first)) ranks.push_back(event.rank);
    EXPECT_EQ(ranks, c.ranks) << "since " << c.first;
  }
}

}  // namespace
}  // namespace ddprun::launcher

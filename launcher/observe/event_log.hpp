#pragma once
/// EventLog: `--events FILE`, the job's events as JSON Lines (one job_event.hpp object per line),
/// written as they happen so that `tail -f FILE` follows the job, and never blocking the agent's
/// loop, whatever FILE is:
/// - a regular file: appended to (O_APPEND: the agents of one machine may share it, a rerun adds
///   to it), one write() per event, which never waits for a reader;
/// - a FIFO: opened without waiting for a reader. With none yet, it is opened read-write (Linux
///   allows it, fifo(7)): events wait in the pipe until a reader comes, who then reads them from
///   the job's start. The pipe's bytes live only as long as someone holds it open, so at the end
///   (when_drained) ddprun hands them to a reader: it takes back what no reader has read, holds
///   the FIFO write-only (a reader's open no longer waits for ddprun, and a write now fails with
///   EPIPE until a reader is there), and writes them once a reader has opened it; what a reader
///   holds open outlives ddprun. No reader within the patience: the events are lost, and said so;
/// - a pipe or terminal (/dev/fd/N, /dev/stderr): a private non-blocking open of it.
/// When the file takes nothing (a reader that stopped reading), events wait in a bounded queue
/// (`limit` bytes), written when the file is writable again (an event of the loop, no polling);
/// past the bound new events are dropped, counted, and said once. A write that fails (a full disk,
/// EIO, the reader gone: EPIPE) is said once, in one line naming the file, and the job goes on
/// without the log.
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "launcher/observe/job_event.hpp"
#include "launcher/base/unique_fd.hpp"

namespace ddprun::launcher {

class EventLog : public JobEventSink {
 public:
  static constexpr std::size_t kDefaultLimit = 1 << 20;
  /// How one of ddprun's warning lines is said (the agent: print_line, queued behind the console).
  using Warn = std::function<void(const std::string& line)>;

  /// Opens `path` (creating a missing file, 0644). Throws LaunchError naming the file when it
  /// cannot be opened: a missing folder, no permission, a socket.
  EventLog(boost::asio::io_context& io, std::string path, Warn warn, std::size_t limit = kDefaultLimit);
  /// Writes what the file takes now (never waits); says how many events were not written (for a
  /// FIFO, that no reader took them).
  ~EventLog() override;
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  /// Appends `event`'s line; never blocks, never throws.
  void record(const JobEvent& event) override;

  /// Calls `done` once, on the loop: when every queued byte is written (for a FIFO: into a pipe a
  /// reader holds open) or the log failed, or after `patience`, whichever comes first (ddprun's
  /// end waits that long at most for a reader).
  void when_drained(std::function<void()> done, std::chrono::milliseconds patience);

  const std::string& path() const { return path_; }
  /// Bytes waiting for the file to take them.
  std::size_t queued() const { return pending_.size() - written_; }
  /// Events dropped because the queue was full.
  std::size_t dropped() const { return dropped_; }
  /// A write failed (said once); nothing more is written.
  bool failed() const { return failed_; }

 private:
  /// Writes from the queue until the file would block; arms a wait for writability then.
  void drain();
  /// write() until done, EAGAIN or an error; returns the bytes written.
  std::size_t write_some(const char* data, std::size_t size);
  void wait_writable();
  void fail(int error);
  void check_drained();
  /// A FIFO opened read-write, at the end: what its pipe holds that no reader took is queued again,
  /// ahead of the rest, and the FIFO is returned opened write-only, for the caller to hold instead
  /// (then the pipe's bytes live only while a reader holds it). Nothing when the path no longer
  /// names that FIFO (then the pipe is left as it is).
  UniqueFd take_back_unread();
  /// Handed over, and no reader yet (a write failed with EPIPE): try again a moment later.
  void look_for_a_reader();

  boost::asio::io_context& io_;
  std::string path_;
  Warn warn_;
  std::size_t limit_;
  UniqueFd file_;  ///< a regular file
  /// Anything else (FIFO, pipe, terminal), so that its writability is an event of the loop.
  std::optional<boost::asio::posix::stream_descriptor> stream_;
  int fd_ = -1;

  std::string pending_;  ///< whole lines, and at its front the rest of a line half written
  std::size_t written_ = 0;  ///< of pending_
  bool waiting_ = false;
  bool failed_ = false;
  std::size_t dropped_ = 0;

  /// A FIFO that had no reader when opened: ddprun holds it read-write, so the pipe keeps what is
  /// written until a reader comes (and while ddprun lives).
  bool own_reader_ = false;
  /// Handed over (take_back_unread): a write that fails with EPIPE means "no reader yet".
  bool awaiting_reader_ = false;
  bool no_reader_now_ = false;   ///< the last write found no reader
  bool reader_took_some_ = false;  ///< since the hand-over, a reader took bytes
  std::optional<boost::asio::steady_timer> reader_timer_;

  std::function<void()> on_drained_;
  std::optional<boost::asio::steady_timer> patience_timer_;
  std::optional<std::chrono::milliseconds> patience_;  ///< when_drained's, as the end's warning says it
};

}  // namespace ddprun::launcher

#include "launcher/observe/event_log.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <utility>

#include "launcher/base/errors.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {
namespace {

constexpr int kOpenFlags = O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;

/// At the end, how often a FIFO handed over is tried again for a reader: nothing tells a writer
/// that a reader opened it (a write end with no reader is always "ready", with an error), and the
/// wait lasts only as long as the end's patience (2 s).
constexpr std::chrono::milliseconds kLookForAReader{20};

[[noreturn]] void cannot_open(const std::string& path, const std::string& why) {
  throw LaunchError("cannot open the event log " + path + " (--events): " + why);
}

/// Opens without ever waiting for a FIFO's reader; `read_write`: it was a FIFO without one, opened
/// read-write.
UniqueFd open_without_waiting(const std::string& path, bool& read_write) {
  read_write = false;
  int fd = ::open(path.c_str(), O_WRONLY | kOpenFlags, 0644);
  if (fd < 0 && errno == ENXIO) {
    // ENXIO: a FIFO without a reader (a socket too, which stat tells apart). Read-write, the open
    // never waits: events wait in the pipe for the reader.
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0 && S_ISFIFO(info.st_mode)) {
      fd = ::open(path.c_str(), O_RDWR | kOpenFlags, 0644);
      read_write = fd >= 0;
    } else {
      cannot_open(path, "it is not a file, a FIFO, a pipe or a terminal");
    }
  }
  if (fd < 0) cannot_open(path, std::strerror(errno));
  return UniqueFd(fd);
}

std::size_t count_lines(std::string_view text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

/// Bytes in the pipe `fd` is an end of, not yet read.
std::size_t unread_in_pipe(int fd) {
  int bytes = 0;
  return ::ioctl(fd, FIONREAD, &bytes) == 0 && bytes > 0 ? static_cast<std::size_t>(bytes) : 0;
}

/// "2 s", "300 ms".
std::string duration_text(std::chrono::milliseconds wait) {
  if (wait.count() % 1000 == 0) return std::to_string(wait.count() / 1000) + " s";
  return std::to_string(wait.count()) + " ms";
}

}  // namespace

EventLog::EventLog(asio::io_context& io, std::string path, Warn warn, std::size_t limit)
    : io_(io), path_(std::move(path)), warn_(std::move(warn)), limit_(limit) {
  bool read_write = false;
  UniqueFd fd = open_without_waiting(path_, read_write);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) cannot_open(path_, std::strerror(errno));
  if (S_ISDIR(info.st_mode)) cannot_open(path_, "it is a folder");
  if (S_ISREG(info.st_mode)) {
    file_ = std::move(fd);
    fd_ = file_.get();
  } else {
    stream_.emplace(io_, fd.release());
    fd_ = stream_->native_handle();
    own_reader_ = read_write;
  }
}

EventLog::~EventLog() {
  // Ended without when_drained (a second signal): the pipe's bytes go with ddprun's descriptor
  // unless a reader holds the FIFO open; handing over tells which.
  UniqueFd handed_over;
  if (own_reader_ && !failed_ && unread_in_pipe(fd_) > 0) {
    handed_over = take_back_unread();
    if (handed_over.get() >= 0) {
      stream_.reset();  // ddprun no longer reads it: only a reader's open keeps the pipe's bytes
      fd_ = handed_over.get();
      awaiting_reader_ = true;
    }
  }
  if (!failed_ && queued() > 0) {
    written_ += write_some(pending_.data() + written_, queued());
  }
  if (failed_) return;  // said already
  const std::size_t unwritten = dropped_ + count_lines(std::string_view(pending_).substr(written_));
  if (unwritten == 0 || !warn_) return;
  if (awaiting_reader_ && !reader_took_some_) {
    const std::string within = patience_ ? " within " + duration_text(*patience_) : "";
    warn_("warning: no reader took the last " + std::to_string(unwritten) + " event(s) of the event log " + path_ +
          " (a FIFO)" + within + "; they are lost");
    return;
  }
  warn_("warning: " + std::to_string(unwritten) + " event(s) were not written to the event log " + path_ +
        " (its reader did not keep up)");
}

void EventLog::record(const JobEvent& event) {
  if (failed_) return;
  std::string line;
  try {
    // replace: a worker's argv or a message may hold bytes that are not UTF-8.
    line = to_json(event).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception&) {
    ++dropped_;
    return;
  }
  line += '\n';
  if (queued() > 0) {
    // Behind lines still waiting: in order, or not at all.
    if (queued() + line.size() > limit_) {
      if (dropped_++ == 0 && warn_) {
        warn_("warning: the event log " + path_ + " takes events slower than they come (is its reader stopped?); "
              "events are dropped until it catches up");
      }
      return;
    }
    pending_ += line;
    return;
  }
  const std::size_t done = write_some(line.data(), line.size());
  if (failed_ || done == line.size()) return;
  // The rest of a line begun goes out first, whatever the bound: a torn line is worse than a byte more.
  pending_.assign(line, done);
  written_ = 0;
  wait_writable();
}

std::size_t EventLog::write_some(const char* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd_, data + done, size - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      if (awaiting_reader_) reader_took_some_ = true;  // a reader holds the pipe: what it holds is safe
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else if (n < 0 && errno == EPIPE && awaiting_reader_) {
      no_reader_now_ = true;  // handed over, and no reader (yet, or any more): not a failure
      break;
    } else {
      fail(n < 0 ? errno : EIO);  // a regular file that takes 0 bytes is full
      break;
    }
  }
  return done;
}

void EventLog::drain() {
  if (failed_) return;
  written_ += write_some(pending_.data() + written_, queued());
  if (failed_) return;
  if (queued() == 0) {
    pending_.clear();
    written_ = 0;
    return check_drained();
  }
  // Drop what was written, now and then, so that the queue never grows by its written front.
  if (written_ > limit_ / 2) {
    pending_.erase(0, written_);
    written_ = 0;
  }
  wait_writable();
}

void EventLog::wait_writable() {
  if (waiting_ || !stream_) {
    // A regular file that took part of a line only fails at the next write: try now.
    if (!stream_ && !failed_ && queued() > 0) drain();
    return;
  }
  waiting_ = true;
  if (awaiting_reader_ && std::exchange(no_reader_now_, false)) return look_for_a_reader();
  stream_->async_wait(asio::posix::stream_descriptor::wait_write, [this](const boost::system::error_code& ec) {
    if (ec == asio::error::operation_aborted) return;  // the log is gone: touch nothing
    waiting_ = false;
    drain();  // an error (the reader closed) shows as the write's errno
  });
}

void EventLog::fail(int error) {
  failed_ = true;
  pending_.clear();
  written_ = 0;
  if (warn_) {
    warn_("warning: cannot write the event log " + path_ + ": " + std::strerror(error) +
          "; the job goes on without it");
  }
  check_drained();
}

void EventLog::look_for_a_reader() {
  if (!reader_timer_) reader_timer_.emplace(io_);
  reader_timer_->expires_after(kLookForAReader);
  reader_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec == asio::error::operation_aborted) return;  // the log is gone: touch nothing
    waiting_ = false;
    drain();
  });
}

UniqueFd EventLog::take_back_unread() {
  own_reader_ = false;
  // Opened while ddprun still reads the FIFO itself, so the open never waits, and the FIFO has a
  // writer throughout: a reader already there reads on, with no end of file in between.
  UniqueFd writer(::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  struct stat ours {}, named {};
  if (writer.get() < 0 || ::fstat(fd_, &ours) != 0 || ::fstat(writer.get(), &named) != 0 ||
      ours.st_dev != named.st_dev || ours.st_ino != named.st_ino) {
    return UniqueFd();  // the path names another file now (the FIFO removed): no reader can come by it
  }
  // What no reader has read goes ahead of what waits here, in order.
  std::string unread;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n > 0) {
      unread.append(buffer, static_cast<std::size_t>(n));
    } else if (!(n < 0 && errno == EINTR)) {
      break;  // EAGAIN: empty (the pipe holds at most its size, so this ends)
    }
  }
  pending_ = unread + pending_.substr(written_);
  written_ = 0;
  return writer;
}

void EventLog::when_drained(std::function<void()> done, std::chrono::milliseconds patience) {
  on_drained_ = std::move(done);
  patience_ = patience;
  if (own_reader_ && !failed_ && unread_in_pipe(fd_) > 0) {
    if (UniqueFd writer = take_back_unread(); writer.get() >= 0) {
      waiting_ = false;                        // the read-write descriptor's wait goes with it
      stream_.emplace(io_, writer.release());  // ddprun holds the FIFO write-only from now on
      fd_ = stream_->native_handle();
      awaiting_reader_ = true;
      drain();
    }
  }
  if (failed_ || queued() == 0) return check_drained();
  patience_timer_.emplace(io_, patience);
  patience_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto done = std::exchange(on_drained_, nullptr)) done();
  });
}

void EventLog::check_drained() {
  if (!on_drained_ || (!failed_ && queued() > 0)) return;
  if (patience_timer_) patience_timer_->cancel();
  asio::post(io_, std::exchange(on_drained_, nullptr));
}

}  // namespace ddprun::launcher

#include "launcher/observe/event_log.hpp"

#include <fcntl.h>
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

[[noreturn]] void cannot_open(const std::string& path, const std::string& why) {
  throw LaunchError("cannot open the event log " + path + " (--events): " + why);
}

/// Opens without ever waiting for a FIFO's reader.
UniqueFd open_without_waiting(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | kOpenFlags, 0644);
  if (fd < 0 && errno == ENXIO) {
    // ENXIO: a FIFO without a reader (a socket too, which stat tells apart). Read-write, the open
    // never waits: events wait in the pipe for the reader.
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0 && S_ISFIFO(info.st_mode)) {
      fd = ::open(path.c_str(), O_RDWR | kOpenFlags, 0644);
    } else {
      cannot_open(path, "it is not a file, a FIFO, a pipe or a terminal");
    }
  }
  if (fd < 0) cannot_open(path, std::strerror(errno));
  return UniqueFd(fd);
}

std::size_t count_lines(std::string_view text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

EventLog::EventLog(asio::io_context& io, std::string path, Warn warn, std::size_t limit)
    : io_(io), path_(std::move(path)), warn_(std::move(warn)), limit_(limit) {
  UniqueFd fd = open_without_waiting(path_);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) cannot_open(path_, std::strerror(errno));
  if (S_ISDIR(info.st_mode)) cannot_open(path_, "it is a folder");
  if (S_ISREG(info.st_mode)) {
    file_ = std::move(fd);
    fd_ = file_.get();
  } else {
    stream_.emplace(io_, fd.release());
    fd_ = stream_->native_handle();
  }
}

EventLog::~EventLog() {
  if (!failed_ && queued() > 0) {
    written_ += write_some(pending_.data() + written_, queued());
  }
  if (failed_) return;  // said already
  const std::size_t unwritten = dropped_ + count_lines(std::string_view(pending_).substr(written_));
  if (unwritten > 0 && warn_) {
    warn_("warning: " + std::to_string(unwritten) + " event(s) were not written to the event log " + path_ +
          " (its reader did not keep up)");
  }
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
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
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

void EventLog::when_drained(std::function<void()> done, std::chrono::milliseconds patience) {
  on_drained_ = std::move(done);
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

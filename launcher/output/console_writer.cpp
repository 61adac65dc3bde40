#include "launcher/output/console_writer.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "launcher/output/live_region.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {
namespace {

/// A larger buffer than this is given back once written, so a burst does not pin memory.
constexpr std::size_t kKeptCapacity = 64 * 1024;

/// A live line longer than this is kept in part: no terminal is this wide, and the bound keeps a
/// source's live line from growing ddprun's memory.
constexpr std::size_t kLiveLineBytes = 4096;

/// A file description of our own for the file behind `fd`, non-blocking; -1 when /proc cannot give one.
int reopen_nonblocking(int fd) {
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  return ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
}

}  // namespace

ConsoleWriter::ConsoleWriter(asio::io_context& io, int fd, std::size_t limit) : fd_(fd), limit_(limit) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    broken_ = true;  // no console at all (closed by whoever started us): output goes nowhere
    return;
  }
  if (S_ISREG(info.st_mode) || S_ISBLK(info.st_mode)) return;  // Mode::direct: never waits for a reader
  if (S_ISSOCK(info.st_mode)) {
    int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (copy < 0) return;  // direct, blocking: better than losing the console
    mode_ = Mode::socket;
    descriptor_.emplace(io, copy);  // only waited on; the sends use MSG_DONTWAIT
    return;
  }
  int own = reopen_nonblocking(fd);
  if (own < 0) {
    own = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (own < 0) return;
    int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0 && (flags & O_NONBLOCK) == 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0) {
      restore_flags_ = flags;
    }
  }
  mode_ = Mode::descriptor;
  descriptor_.emplace(io, own);
  const char* term = std::getenv("TERM");
  live_ = ::isatty(fd) == 1 && !(term != nullptr && std::string_view(term) == "dumb");
  if (live_) refresh_size();
}

void ConsoleWriter::refresh_size() {
  if (!live_) return;
  winsize size{};
  if (::ioctl(fd_, TIOCGWINSZ, &size) == 0 && size.ws_col > 1 && size.ws_row > 0) {
    columns_ = size.ws_col;
    rows_ = size.ws_row;
  }
  // The status block is drawn anew at the next sample; until then its lines are cut to the new width.
  for (auto& line : status_lines_) line = fit_to_width(line, columns_ - 1);
  if (!live_lines_.empty() || !status_lines_.empty()) {
    live_dirty_ = true;
    start_write();
  }
}

void ConsoleWriter::write(std::string_view bytes, int source, std::string_view live_text) {
  if (!live_) return write(bytes);
  if (broken_) return;
  if (live_text.empty()) {
    if (live_lines_.erase(source) > 0) live_dirty_ = true;
  } else {
    live_text = live_text.substr(0, kLiveLineBytes);
    auto [it, added] = live_lines_.try_emplace(source);
    if (added || it->second != live_text) {
      it->second.assign(live_text);
      live_dirty_ = true;
    }
  }
  if (!bytes.empty()) {
    if (drained()) last_progress_ = std::chrono::steady_clock::now();
    pending_.append(bytes);
  }
  start_write();
}

void ConsoleWriter::set_status(std::vector<std::string> lines) {
  if (!live_ || broken_ || lines == status_lines_) return;
  status_lines_ = std::move(lines);
  live_dirty_ = true;
  start_write();
}

ConsoleWriter::~ConsoleWriter() {
  if (descriptor_) {
    boost::system::error_code ignored;
    descriptor_->close(ignored);
  }
  if (restore_flags_) ::fcntl(fd_, F_SETFL, *restore_flags_);
}

void ConsoleWriter::write(std::string_view bytes) {
  if (broken_ || bytes.empty()) return;
  if (drained()) last_progress_ = std::chrono::steady_clock::now();  // the wait starts now
  if (mode_ == Mode::direct) {
    while (!bytes.empty()) {
      ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n > 0) {
        bytes.remove_prefix(static_cast<std::size_t>(n));
      } else if (n < 0 && errno != EINTR) {
        return fail();
      }
    }
    return;
  }
  pending_.append(bytes);
  start_write();
}

void ConsoleWriter::start_write() {
  if (write_in_flight_ || broken_) return;
  if (written_ == writing_.size()) {
    if (!has_work()) return;
    writing_.clear();
    written_ = 0;
    if (live_) {
      // One frame: the live region taken back, the complete lines, the live lines as they are now.
      std::vector<std::string> lines;
      lines.reserve(live_lines_.size());
      for (const auto& entry : live_lines_) lines.push_back(fit_to_width(entry.second, columns_ - 1));
      // The status block keeps its rows; the sources' live lines get what is left.
      const std::size_t status_rows = std::min(status_lines_.size(), rows_ > 1 ? rows_ - 1 : 0);
      lines = fit_to_rows(std::move(lines), rows_ - status_rows);
      lines.insert(lines.end(), status_lines_.begin(), status_lines_.begin() + static_cast<std::ptrdiff_t>(status_rows));
      writing_ = render_frame(live_shown_, pending_, lines);
      live_shown_ = lines.size();
      live_dirty_ = false;
      pending_.clear();
    } else {
      writing_.swap(pending_);
    }
    if (pending_.capacity() > kKeptCapacity) pending_ = {};
    if (writing_.empty()) return;
  }
  write_in_flight_ = true;
  std::weak_ptr<int> life = life_;
  if (mode_ == Mode::descriptor) {
    descriptor_->async_write_some(asio::buffer(writing_.data() + written_, writing_.size() - written_),
                                  [this, life](const boost::system::error_code& ec, std::size_t n) {
                                    if (life.expired()) return;
                                    write_in_flight_ = false;
                                    if (ec) return fail();
                                    on_written(n);
                                  });
    return;
  }
  descriptor_->async_wait(asio::posix::descriptor_base::wait_write,
                          [this, life](const boost::system::error_code& ec) {
                            if (life.expired()) return;
                            write_in_flight_ = false;
                            if (ec) return fail();
                            ssize_t n = ::send(fd_, writing_.data() + written_, writing_.size() - written_,
                                               MSG_DONTWAIT | MSG_NOSIGNAL);
                            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) n = 0;
                            if (n < 0) return fail();
                            on_written(static_cast<std::size_t>(n));
                          });
}

void ConsoleWriter::on_written(std::size_t n) {
  written_ += n;
  if (n > 0) last_progress_ = std::chrono::steady_clock::now();
  if (written_ == writing_.size()) {
    writing_.clear();
    written_ = 0;
    if (writing_.capacity() > kKeptCapacity) writing_ = {};
  }
  start_write();
  notify();
}

void ConsoleWriter::fail() {
  broken_ = true;
  pending_ = {};
  writing_ = {};
  written_ = 0;
  notify();
}

void ConsoleWriter::notify() {
  if (queued() <= limit_ / 2 && !room_waiters_.empty()) {
    auto waiters = std::move(room_waiters_);
    room_waiters_.clear();
    for (auto& resume : waiters) resume();
  }
  if (drained() && !drain_waiters_.empty()) {
    auto waiters = std::move(drain_waiters_);
    drain_waiters_.clear();
    for (auto& done : waiters) done();
  }
}

void ConsoleWriter::when_room(std::function<void()> resume) {
  room_waiters_.push_back(std::move(resume));
  if (queued() <= limit_ / 2) notify();
}

void ConsoleWriter::when_drained(std::function<void()> done) {
  drain_waiters_.push_back(std::move(done));
  if (drained()) notify();
}

}  // namespace ddprun::launcher

#include "launcher/terminal/stdin_forwarder.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <boost/asio/post.hpp>
#include <cerrno>

namespace asio = boost::asio;

namespace ddprun::launcher {
namespace {

/// How far ddprun reads ahead of the slowest worker taking input.
constexpr std::size_t kQueueLimit = 64 * 1024;
constexpr std::size_t kReadChunk = 16 * 1024;

}  // namespace

struct StdinForwarder::Target {
  Target(asio::io_context& io, pid_t p, int fd, bool is_pty) : pid(p), out(io, fd), pty(is_pty) {}
  pid_t pid;
  asio::posix::stream_descriptor out;
  bool pty;
  std::string queue;    ///< read, not yet handed to a write
  std::string sending;  ///< the bytes of the write in flight: never touched until it completes
  bool writing = false;
  bool ended = false;          ///< its end of input was sent
  bool line_begun = false;     ///< the last byte sent was not a newline
};

StdinForwarder::StdinForwarder(asio::io_context& io, int source)
    : io_(io), source_fd_(source), terminal_(source), continued_(io), foreground_check_(io) {}

StdinForwarder::~StdinForwarder() {
  terminal_.restore();
  boost::system::error_code ignored;
  continued_.cancel(ignored);
  foreground_check_.cancel();
  if (source_) source_->close(ignored);
  for (auto& target : targets_) target->out.close(ignored);
  if (saved_ttin_) ::sigaction(SIGTTIN, &*saved_ttin_, nullptr);
}

void StdinForwarder::open_source() {
  kind_ = Kind::unusable;
  struct stat info {};
  if (::fstat(source_fd_, &info) != 0) return;  // no stdin at all: the workers get their end at once
  if (S_ISREG(info.st_mode) || S_ISBLK(info.st_mode)) {
    kind_ = Kind::file;  // never waits: read on the loop a chunk at a time
    return;
  }
  tty_ = ::isatty(source_fd_) == 1;
  // A description of our own, non-blocking, so that the shell's (shared) one keeps its flags.
  std::string path = "/proc/self/fd/" + std::to_string(source_fd_);
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  Kind kind = Kind::pollable;
  if (fd < 0 && S_ISSOCK(info.st_mode)) {
    fd = ::fcntl(source_fd_, F_DUPFD_CLOEXEC, 3);  // a socket (ssh without a tty): recv(MSG_DONTWAIT)
    kind = Kind::socket;
  }
  if (fd < 0) return;
  boost::system::error_code ec;
  source_.emplace(io_);
  source_->assign(fd, ec);
  if (ec) {
    // Not pollable (/dev/null and other devices): reads do not wait, so read like a file.
    ::close(fd);
    source_.reset();
    kind_ = Kind::file;
    return;
  }
  kind_ = kind;
  if (tty_) {
    // From the background, a read of the terminal would stop ddprun (SIGTTIN); ignored, the read
    // fails with EIO instead and ddprun waits for SIGCONT. Workers get SIGTTIN's default back.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    struct sigaction old {};
    if (::sigaction(SIGTTIN, &ignore, &old) == 0) saved_ttin_ = old;
    continued_.add(SIGCONT);
    wait_continue();
  }
}

void StdinForwarder::wait_continue() {
  std::weak_ptr<int> life = life_;
  continued_.async_wait([this, life](const boost::system::error_code& ec, int) {
    if (ec || life.expired()) return;
    // Brought back (fg or bg): the terminal mode again if in the foreground; reading resumes.
    take_terminal();
    background_ = false;
    foreground_check_.cancel();
    read_more();
    wait_continue();
  });
}

void StdinForwarder::in_background() {
  background_ = true;
  std::weak_ptr<int> life = life_;
  foreground_check_.expires_after(std::chrono::milliseconds(250));
  foreground_check_.async_wait([this, life](const boost::system::error_code& ec) {
    if (ec || life.expired() || !background_) return;
    if (!in_foreground(source_fd_)) return in_background();
    background_ = false;
    take_terminal();
    read_more();
  });
}

void StdinForwarder::take_terminal() {
  if (!tty_) return;
  for (const auto& target : targets_) {
    if (target->pty) {
      terminal_.enter();  // a no-op in the background: done again once in the foreground
      return;
    }
  }
}

void StdinForwarder::add_target(pid_t pid, int fd, bool pty) {
  auto target = std::make_shared<Target>(io_, pid, fd, pty);
  targets_.push_back(target);
  if (kind_ == Kind::unset) open_source();
  if (pty) take_terminal();
  write_more(target);
  read_more();
}

void StdinForwarder::remove_target(pid_t pid) {
  for (auto it = targets_.begin(); it != targets_.end(); ++it) {
    if ((*it)->pid != pid) continue;
    drop(*it);
    return;
  }
}

void StdinForwarder::drop(const std::shared_ptr<Target>& target) {
  boost::system::error_code ignored;
  target->out.close(ignored);
  targets_.remove(target);
  bool pty_left = false;
  for (const auto& other : targets_) pty_left = pty_left || other->pty;
  if (!pty_left) terminal_.restore();  // nobody edits lines for the user any more: the terminal does
  read_more();
}

bool StdinForwarder::has_room() const {
  if (targets_.empty()) return false;  // nothing read for nobody: stdin stays the next reader's
  for (const auto& target : targets_) {
    if (target->queue.size() + target->sending.size() >= kQueueLimit) return false;
  }
  return true;
}

void StdinForwarder::read_more() {
  if (reading_ || at_end_ || background_ || !has_room()) return;
  std::weak_ptr<int> life = life_;
  if (kind_ == Kind::unusable) return on_source_end();
  if (kind_ == Kind::file) {
    reading_ = true;
    asio::post(io_, [this, life] {
      if (life.expired()) return;
      reading_ = false;
      on_readable();
    });
    return;
  }
  reading_ = true;
  source_->async_wait(asio::posix::descriptor_base::wait_read, [this, life](const boost::system::error_code& ec) {
    if (life.expired()) return;
    reading_ = false;
    if (ec == asio::error::operation_not_supported) {
      // A device epoll cannot watch (/dev/zero, /dev/urandom): Asio took it, but cannot wait for
      // it. Its reads do not wait either: read it like a file.
      kind_ = Kind::file;
      return read_more();
    }
    if (ec) return on_source_end();
    on_readable();
  });
}

void StdinForwarder::on_readable() {
  if (!has_room()) return;  // the worker went meanwhile: stdin stays unread
  if (tty_ && !in_foreground(source_fd_)) return in_background();  // a read would stop ddprun
  if (tty_ && !terminal_.entered()) take_terminal();  // in the foreground since the last look
  std::array<char, kReadChunk> buffer{};
  ssize_t n = 0;
  int fd = source_ ? source_->native_handle() : source_fd_;
  do {
    n = kind_ == Kind::socket ? ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT)
                              : ::read(fd, buffer.data(), buffer.size());
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    on_data(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
    return read_more();
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return read_more();
  if (n < 0 && errno == EIO && tty_) return in_background();  // after all (SIGTTIN is ignored)
  on_source_end();
}

void StdinForwarder::on_data(std::string_view data) {
  for (const auto& target : targets_) {
    target->queue.append(data);
    write_more(target);
  }
}

void StdinForwarder::on_source_end() {
  at_end_ = true;
  auto targets = targets_;  // write_more may drop a target
  for (const auto& target : targets) write_more(target);
}

void StdinForwarder::write_more(const std::shared_ptr<Target>& target) {
  if (target->writing || target->ended) return;
  if (target->sending.empty()) {
    if (target->queue.empty()) {
      if (at_end_) end_input(*target);
      return;
    }
    // What is read meanwhile is appended to `queue`, which may reallocate: the write in flight
    // owns a buffer of its own.
    target->sending.swap(target->queue);
  }
  target->writing = true;
  std::weak_ptr<int> life = life_;
  target->out.async_write_some(asio::buffer(target->sending), [this, life, target](const boost::system::error_code& ec,
                                                                                     std::size_t n) {
    if (life.expired()) return;
    target->writing = false;
    if (ec) {
      // The worker is gone (EIO on a pty whose slave closed, EPIPE on a pipe): nothing more for it.
      if (ec != asio::error::operation_aborted) drop(target);
      return;
    }
    target->line_begun = target->sending[n - 1] != '\n';
    target->sending.erase(0, n);
    write_more(target);
    read_more();
  });
}

void StdinForwarder::end_input(Target& target) {
  target.ended = true;
  if (!target.pty) {
    boost::system::error_code ignored;
    target.out.close(ignored);  // the pipe's end is the worker's EOF
    return;
  }
  // A pty has no end of its own: its EOF character is one, at the start of a line (a begun line
  // needs one to be passed on, and a second for the end).
  termios mode{};
  char eof = 4;
  if (::tcgetattr(target.out.native_handle(), &mode) == 0 && mode.c_cc[VEOF] != _POSIX_VDISABLE) {
    eof = static_cast<char>(mode.c_cc[VEOF]);
  }
  std::string ends(target.line_begun ? 2 : 1, eof);
  [[maybe_unused]] ssize_t n = ::write(target.out.native_handle(), ends.data(), ends.size());
}

}  // namespace ddprun::launcher

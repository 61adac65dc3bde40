#pragma once
/// ConsoleWriter: one of ddprun's own output streams (stdout or stderr), written from the event loop
/// without ever blocking it. A pager paused with Ctrl-S, a log shipper that stopped reading or a full
/// pipe must not stop the agent from acting on signals and worker exits.
///
/// Bytes are queued and handed to the console as it takes them. When more than `limit` bytes wait,
/// `full()` says so and the callers (the workers' pipe readers) stop reading until `when_room`
/// calls them back: back-pressure to the workers, never unbounded memory. ddprun's own lines are
/// always queued. A console whose reader is gone (EPIPE) or that fails takes nothing more.
///
/// How a write avoids blocking depends on what the console is: a regular file is written directly
/// (it never waits for a reader); a pipe, FIFO or terminal is reopened through /proc/self/fd as a
/// private non-blocking file description (setting O_NONBLOCK on the shared one would leak into the
/// shell that shares it); a socket gets send(MSG_DONTWAIT). When /proc is unavailable, O_NONBLOCK is
/// set on the shared description and restored when the writer goes away.
///
/// On a terminal, the writer keeps a live region at the bottom (live_region.hpp): one line per
/// source, redrawn in place as the source updates it; queued whole lines are printed above it. Live
/// updates are not queued as bytes: each write shows the latest state, so a fast progress bar on a
/// slow terminal costs one frame per write, not one per update.
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

class ConsoleWriter {
 public:
  static constexpr std::size_t kDefaultLimit = 1 << 20;

  ConsoleWriter(boost::asio::io_context& io, int fd, std::size_t limit = kDefaultLimit);
  ~ConsoleWriter();
  ConsoleWriter(const ConsoleWriter&) = delete;
  ConsoleWriter& operator=(const ConsoleWriter&) = delete;

  int fd() const { return fd_; }

  /// Queues `bytes` (whole lines, so that lines of different sources never tear). Never blocks.
  void write(std::string_view bytes);

  /// Whether this console shows live lines (a terminal, TERM is not dumb).
  bool live() const { return live_; }
  /// Queues `bytes` (whole lines) and makes `live_text` the live line of `source` (empty: it has
  /// none), in one frame. On a console that is not live, only queues `bytes`.
  void write(std::string_view bytes, int source, std::string_view live_text);
  /// The terminal's size changed (SIGWINCH): live lines are cut to the new width from the next frame.
  void refresh_size();
  /// The terminal's size as last read (80x24 when it is not a terminal).
  std::size_t columns() const { return columns_; }
  std::size_t rows() const { return rows_; }
  /// Makes `lines` the status block, drawn below the sources' live lines and redrawn in place
  /// like them; empty: no block. Lines must fit the width already (status_render.hpp) and hold no
  /// control character that moves the cursor. Does nothing on a console that is not live.
  void set_status(std::vector<std::string> lines);

  /// More than the limit waits: sources should pause until `when_room`.
  bool full() const { return queued() > limit_; }
  /// Nothing waits to be written (or the console is gone).
  bool drained() const { return queued() == 0; }
  std::size_t queued() const { return broken_ ? 0 : pending_.size() + writing_.size() - written_; }
  /// How long bytes have waited without the console taking any (zero when nothing waits): a stop
  /// gives up on a console stalled this long instead of waiting for it.
  std::chrono::steady_clock::duration stalled_for() const {
    return drained() ? std::chrono::steady_clock::duration::zero() : std::chrono::steady_clock::now() - last_progress_;
  }

  /// Calls `resume` once, on the loop, when the queue has fallen to half the limit or the console is
  /// gone (its data then goes nowhere, so there is nothing to wait for).
  void when_room(std::function<void()> resume);
  /// Calls `done` once, on the loop, when nothing waits any more.
  void when_drained(std::function<void()> done);

 private:
  enum class Mode { direct, descriptor, socket };

  void start_write();
  bool has_work() const { return !pending_.empty() || live_dirty_; }
  void on_written(std::size_t n);
  void fail();
  void notify();

  int fd_;
  std::size_t limit_;
  Mode mode_ = Mode::direct;
  std::optional<boost::asio::posix::stream_descriptor> descriptor_;
  std::optional<int> restore_flags_;  ///< the shared description's flags, when we had to change them
  std::string pending_;               ///< queued, not yet handed to a write
  std::string writing_;               ///< the write in flight, from `written_` on
  std::size_t written_ = 0;
  std::chrono::steady_clock::time_point last_progress_ = std::chrono::steady_clock::now();
  bool write_in_flight_ = false;
  bool broken_ = false;
  std::vector<std::function<void()>> room_waiters_;
  std::vector<std::function<void()>> drain_waiters_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);

  // The live region (terminals only).
  bool live_ = false;
  bool live_dirty_ = false;        ///< the live lines changed since the last frame
  std::map<int, std::string> live_lines_;  ///< by source, fitted to the width
  std::vector<std::string> status_lines_;  ///< the status block, below the live lines
  std::size_t live_shown_ = 0;     ///< live lines the terminal shows (after the write in flight)
  std::size_t columns_ = 80;
  std::size_t rows_ = 24;
};

}  // namespace ddprun::launcher

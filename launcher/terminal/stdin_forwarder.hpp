#pragma once
/// StdinForwarder: ddprun's stdin carried to the workers that read it (`--stdin rank0`: global rank
/// 0; `all`: every local worker), on the agent's loop, never blocking it. The others read /dev/null.
///
/// ddprun's stdin may be a terminal, a pipe, a socket or a regular file. It is read only while some
/// worker takes it (a node without rank 0 reads nothing, so never steals input), at most 64 KiB
/// ahead of the slowest such worker. Its end becomes each worker's end of input: the pty's EOF
/// character (VEOF, Ctrl-D) for a pty, the pipe's close for a pipe; a worker started later (a
/// restart) gets the same. A terminal is read only while ddprun is in its foreground: `ddprun &`
/// is not stopped by SIGTTIN, and it starts reading when brought to the foreground: at SIGCONT
/// (`fg` of a stopped job), or at the next look, 4 times a second, while in the background (bash's
/// `fg` of a running job sends no signal: no event says so).
/// While a worker's pty takes a terminal's input, the terminal is in TerminalMode.
#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/terminal/terminal_mode.hpp"

namespace ddprun::launcher {

class StdinForwarder {
 public:
  /// Forwards `source` (ddprun's stdin). Reads nothing until a target is added.
  StdinForwarder(boost::asio::io_context& io, int source);
  ~StdinForwarder();  ///< restores the terminal, closes the targets
  StdinForwarder(const StdinForwarder&) = delete;
  StdinForwarder& operator=(const StdinForwarder&) = delete;

  /// Worker `pid` reads from `fd` (owned from now on): its pty's master (`pty`) or its stdin pipe.
  void add_target(pid_t pid, int fd, bool pty);
  /// Worker `pid` is gone: what it had not taken is dropped.
  void remove_target(pid_t pid);
  /// Puts ddprun's terminal back as it was (the job is ending; also done by the destructor).
  void restore_terminal() { terminal_.restore(); }

 private:
  struct Target;
  enum class Kind { unset, pollable, socket, file, unusable };

  void open_source();
  void read_more();
  void on_readable();
  void on_data(std::string_view data);
  void on_source_end();
  void write_more(const std::shared_ptr<Target>& target);
  void end_input(Target& target);
  void drop(const std::shared_ptr<Target>& target);
  bool has_room() const;
  void wait_continue();
  void in_background();
  /// The terminal in forwarding mode, when it is one and a worker's pty takes its keys.
  void take_terminal();

  boost::asio::io_context& io_;
  int source_fd_;
  Kind kind_ = Kind::unset;
  bool tty_ = false;
  std::optional<boost::asio::posix::stream_descriptor> source_;
  bool reading_ = false;     ///< a wait or read of the source is outstanding
  bool background_ = false;  ///< a terminal source, and ddprun is not in its foreground
  bool at_end_ = false;
  std::optional<struct sigaction> saved_ttin_;
  std::list<std::shared_ptr<Target>> targets_;
  TerminalMode terminal_;
  boost::asio::signal_set continued_;
  boost::asio::steady_timer foreground_check_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace ddprun::launcher

#include "launcher/fleet/fleet.hpp"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "launcher/output/console.hpp"
#include "launcher/output/console_output.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/fleet/fleet_child.hpp"
#include "launcher/fleet/fleet_rule.hpp"
#include "launcher/output/line_splitter.hpp"
#include "launcher/base/safe_kill.hpp"
#include "launcher/fleet/session_watch.hpp"
#include "launcher/base/signal_names.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {
namespace {

constexpr auto kKeepAliveEvery = std::chrono::seconds(1);
/// What a pre-flight ssh may take beyond its ConnectTimeout (authentication, the remote shell).
constexpr auto kPreflightSlack = std::chrono::seconds(10);
/// Between SIGTERM and SIGKILL for an ssh that outlived the agents' grace.
constexpr auto kSshGrace = std::chrono::seconds(2);

std::string own_path() {
  std::array<char, PATH_MAX + 1> path{};
  ssize_t n = ::readlink("/proc/self/exe", path.data(), PATH_MAX);
  if (n <= 0) throw LaunchError(std::string("cannot find ddprun's own path (/proc/self/exe): ") + std::strerror(errno));
  return std::string(path.data(), static_cast<std::size_t>(n));
}

std::string current_folder() {
  std::array<char, PATH_MAX + 1> path{};
  if (::getcwd(path.data(), path.size()) == nullptr) {
    throw LaunchError(std::string("cannot read the current folder: ") + std::strerror(errno));
  }
  return path.data();
}

/// One of a child's output pipes, read line by line.
struct Stream {
  Stream(asio::io_context& io, UniqueFd fd) : pipe(io, fd.release()) {}
  asio::posix::stream_descriptor pipe;
  LineSplitter lines{64 * 1024};
  std::array<char, 16 * 1024> buffer{};
};

/// One host: its ssh, what it printed, how it ended.
struct Node {
  int rank = 0;
  std::string host;     ///< as other machines reach it (no user)
  std::string prefix;   ///< "host: ", coloured on a terminal
  pid_t pid = -1;
  UniqueFd in;
  std::unique_ptr<Stream> out, err;
  int open_streams = 0;
  std::optional<int> status;
  bool ready = false;    ///< its checks passed (kReadyLine); it waits for the go
  bool silent = false;   ///< neither ready nor ended within the pre-flight's time
  std::string err_tail;  ///< before the go: what ssh and the login said on stderr (its last 4 KiB)
};

class Fleet {
 public:
  Fleet(const LaunchConfig& config, const Environ& env)
      : config_(config), env_(env), stops_(io_), children_(io_, SIGCHLD), keep_alive_(io_), deadline_(io_) {
    for (int signo : config.signals_to_handle) stops_.add(signo);
    ddprun_ = own_path();
    cwd_ = current_folder();
    go_ = go_line(config.store_token);
  }

  int run() {
    console_.emplace(io_);
    wait_signals();
    wait_children();
    start_hosts();
    io_.run();
    return finish();
  }

 private:
  // ---- the loop's plumbing

  void wait_signals() {
    stops_.async_wait([this](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      if (!stop_signal_) {
        stop_signal_ = signo;
        stop(signal_name(signo) + ": stopping every node");
      } else {
        end_ssh(SIGTERM);  // asked twice: do not wait for the agents' grace
      }
      wait_signals();
    });
  }

  void wait_children() {
    children_.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      for (auto& node : nodes_) {
        if (node.status || node.pid <= 0) continue;
        if (auto status = reap_if_exited(node.pid)) node_ended(node, *status);
      }
      wait_children();
      check_done();
    });
  }

  /// A line of a host's stdout (is_err false) or stderr. Before the go, stdout waits for the ready
  /// line and stderr is kept for the pre-flight's verdict (a login's chatter is not shown).
  void on_line(Node& node, std::string_view text, bool is_err) {
    if (!went_) {
      if (!is_err && !node.ready && text == kReadyLine) {
        node.ready = true;
        settle_preflight();
      } else if (is_err) {
        node.err_tail.append(text).append("\n");
        if (node.err_tail.size() > 4096) node.err_tail.erase(0, node.err_tail.size() - 4096);
      }
      return;
    }
    (is_err ? console_->err() : console_->out()).write(node.prefix + std::string(text) + "\n");
  }

  void read(Node& node, Stream& stream, bool is_err) {
    stream.pipe.async_read_some(asio::buffer(stream.buffer), [this, &node, &stream, is_err](
                                                                  const boost::system::error_code& ec, std::size_t n) {
      auto line = [&](std::string_view text) { on_line(node, text, is_err); };
      if (ec) {
        if (ec == asio::error::operation_aborted) return;
        stream.lines.finish(line);
        --node.open_streams;
        check_done();
        return;
      }
      stream.lines.feed(std::string_view(stream.buffer.data(), n), line);
      ConsoleWriter& to = is_err ? console_->err() : console_->out();
      if (to.full()) {
        to.when_room([this, &node, &stream, is_err] { read(node, stream, is_err); });
      } else {
        read(node, stream, is_err);
      }
    });
  }

  void check_done() {
    for (const auto& node : nodes_) {
      if (!node.status || node.open_streams > 0) return;
    }
    io_.stop();
  }

  // ---- the pre-flight and the start: one ssh session per host

  /// Every host's ssh at once, each running the gated command: its checks, the ready line, then a
  /// wait for the go that settle_preflight sends once every host is ready.
  void start_hosts() {
    const bool color = use_color(env_, STDOUT_FILENO);
    nodes_.reserve(config_.fleet.hosts.size());
    for (const auto& host : config_.fleet.hosts) {
      Node& node = nodes_.emplace_back();
      node.rank = static_cast<int>(nodes_.size()) - 1;
      node.host = host_address(host.destination);
      node.prefix = color ? colorize(node.host + ":", node.rank) + " " : node.host + ": ";
      RemoteCommand remote;
      remote.cwd = cwd_;
      remote.env = exported_environment(env_, config_.fleet.exports);
      remote.env.emplace_back(std::string(kSessionWatchVariable), std::to_string(config_.fleet.ssh.alive_timeout_s));
      remote.argv = agent_argv(config_, node.rank, ddprun_);
      std::vector<std::string> argv = ssh_argv(config_.fleet.ssh, host.destination, gated_remote_command(remote));
      if (config_.verbose) {
        std::string line = "ddprun: node " + std::to_string(node.rank) + ":";
        for (const auto& arg : argv) line += " " + shell_quote(arg);
        console_->err().write(line + "\n");
      }
      FleetChild child = spawn_fleet_child(argv, env_);
      node.pid = child.pid;
      node.in = std::move(child.in);
      node.out = std::make_unique<Stream>(io_, std::move(child.out));
      node.err = std::make_unique<Stream>(io_, std::move(child.err));
      node.open_streams = 2;
      read(node, *node.out, false);
      read(node, *node.err, true);
    }
    deadline_.expires_after(std::chrono::seconds(config_.fleet.ssh.connect_timeout_s) + kPreflightSlack);
    deadline_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || went_ || stopping_) return;
      for (auto& node : nodes_) {
        if (!node.ready && !node.status) node.silent = true;
      }
      refuse();
    });
  }

  /// Each time a host becomes ready or ends before its go: once every host is ready, the go;
  /// once every host is settled and one is not ready, the refusal.
  void settle_preflight() {
    if (went_ || stopping_) return;
    bool all_ready = true;
    for (const auto& node : nodes_) {
      if (!node.ready && !node.status) return;  // still checking
      all_ready = all_ready && node.ready && !node.status;
    }
    if (!all_ready) {
      refuse();
      return;
    }
    went_ = true;
    deadline_.cancel();
    for (auto& node : nodes_) {
      // An empty pipe takes the whole line (a token file is far below the pipe's 64 KiB); a host
      // whose ssh is gone meanwhile ends on its own.
      ssize_t written = ::write(node.in.get(), go_.data(), go_.size());
      (void)written;
    }
    keep_alive();
  }

  /// Names every host that failed its checks on a line of its own; the others' waits end (their
  /// stdin closes) and nothing starts anywhere.
  void refuse() {
    refused_ = true;
    stopping_ = true;
    deadline_.cancel();
    for (auto& node : nodes_) {
      std::string verdict = node.silent ? "unreachable: no answer within " +
                                              std::to_string(config_.fleet.ssh.connect_timeout_s + 10) + " s"
                                        : node.ready ? std::string()
                                                     : preflight_verdict(node.status.value_or(kSshFailed), node.err_tail, cwd_, ddprun_);
      if (verdict.empty() && !node.ready) verdict = "ended before its checks (is its login shell a POSIX sh?)";
      if (!verdict.empty()) console_->err().write("ddprun: host " + node.host + ": " + verdict + "\n");
      node.in.reset();
    }
    console_->err().write("ddprun: nothing was started (the hosts above cannot be used)\n");
    end_ssh(SIGTERM);  // the ready ones exit on their own; the silent ones are still connecting
  }

  void keep_alive() {
    for (auto& node : nodes_) {
      if (node.in.get() < 0) continue;
      ssize_t written = ::write(node.in.get(), "\n", 1);  // a full pipe (EAGAIN) skips one; a gone ssh, EPIPE
      (void)written;
    }
    keep_alive_.expires_after(kKeepAliveEvery);
    keep_alive_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) keep_alive();
    });
  }

  // ---- the job

  void node_ended(Node& node, int status) {
    node.status = status;
    node.in.reset();
    if (!went_) {
      settle_preflight();
      return;
    }
    NodeEnd end{node.rank, node.host, status};
    if (stopping_) {
      ends_.push_back(end);
      return;
    }
    const int others = nodes_left();
    switch (judge_node_end(end, shape(), others)) {
      case NodeEndVerdict::finished:
        ends_.push_back(end);
        return;
      case NodeEndVerdict::go_on_without:
        // Its agent stops its own workers (its session watch); the others' rounds drop it.
        console_->err().write("ddprun: " + describe_node_end(end) + describe_going_on(shape(), others) + "\n");
        return;
      case NodeEndVerdict::job_failed:
        ends_.push_back(end);
        failures_.push_back(end);
        stop(describe_node_end(end) + "; stopping the other nodes");
        return;
    }
  }

  /// The nodes still in the job: running, or finished well (then the job is ending well).
  int nodes_left() const {
    int count = 0;
    for (const auto& node : nodes_) count += !node.status || *node.status == 0 ? 1 : 0;
    return count;
  }

  /// What the job can lose (fleet_rule.hpp).
  FleetShape shape() const {
    FleetShape shape;
    shape.elastic = config_.rdzv_backend != RdzvBackend::static_;
    shape.min_nodes = config_.topology.min_nodes;
    shape.max_nodes = config_.topology.max_nodes;
    // c10d's store is on the agent of the endpoint's host; made here, that is node 0. A store the
    // user placed elsewhere (or on a host of the job) is not known: its loss ends the job after
    // read_timeout, through the other agents' failures.
    if (config_.rdzv_backend == RdzvBackend::c10d && config_.fleet.endpoint_made) shape.store_node = 0;
    return shape;
  }

  /// Every agent's stdin closed: each stops its workers as on SIGHUP and exits; ssh follows.
  void stop(const std::string& why) {
    if (stopping_) return;
    stopping_ = true;
    console_->err().write("ddprun: " + why + "\n");
    for (auto& node : nodes_) node.in.reset();
    if (!went_) {
      end_ssh(SIGTERM);  // nothing started anywhere: the sessions have nothing to stop
      return;
    }
    const auto grace = std::chrono::milliseconds(static_cast<long long>(config_.shutdown_timeout_s * 1000)) +
                       std::chrono::seconds(config_.fleet.ssh.alive_timeout_s) + std::chrono::seconds(5);
    deadline_.expires_after(grace);
    deadline_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) end_ssh(SIGTERM);
    });
  }

  /// Signals every ssh still running; SIGTERM is followed by SIGKILL after kSshGrace.
  void end_ssh(int signo) {
    for (const auto& node : nodes_) {
      if (!node.status && node.pid > 1) signal_process_group(node.pid, signo);
    }
    if (signo == SIGKILL) return;
    deadline_.expires_after(kSshGrace);
    deadline_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) end_ssh(SIGKILL);
    });
  }

  /// Prints the failures and waits (briefly) for the console; returns the exit status.
  int finish() {
    keep_alive_.cancel();
    deadline_.cancel();
    for (const auto& end : failures_) console_->err().write("ddprun: the job failed: " + describe_node_end(end) + "\n");
    int result = stop_signal_ ? fleet_exit_status(stop_signal_, ends_)
                 : refused_   ? kExitHostsUnreachable
                              : fleet_exit_status(std::nullopt, ends_);
    io_.restart();
    bool drained = false;
    console_->when_drained([&] { drained = true; });
    deadline_.expires_after(std::chrono::seconds(2));
    deadline_.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) drained = true;
    });
    while (!drained && io_.run_one() > 0) {
    }
    console_.reset();
    return result;
  }

  const LaunchConfig& config_;
  const Environ& env_;
  asio::io_context io_;
  std::optional<ConsoleOutput> console_;
  asio::signal_set stops_;
  asio::signal_set children_;
  asio::steady_timer keep_alive_;
  asio::steady_timer deadline_;
  std::string ddprun_;
  std::string cwd_;
  std::string go_;  ///< the go line, with the store token when the job has one
  std::vector<Node> nodes_;
  std::vector<NodeEnd> ends_;
  std::vector<NodeEnd> failures_;
  std::optional<int> stop_signal_;
  bool went_ = false;      ///< every host was ready and got its go: the agents run
  bool refused_ = false;   ///< the pre-flight named a host: nothing started
  bool stopping_ = false;
};

}  // namespace

int run_fleet(const LaunchConfig& config, const Environ& env) {
  Fleet fleet(config, env);
  return fleet.run();
}

}  // namespace ddprun::launcher

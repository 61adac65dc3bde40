#pragma once
/// EtcdMember: a real etcd (Debian's etcd-server) of the test's own: a single member on loopback
/// at free ports with its own data folder, started by the constructor and stopped (SIGTERM, then
/// SIGKILL) by the destructor. The command can be prefixed (e.g. "ip netns exec NAME") and the
/// member can join a cluster, for the multi-node tests.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/free_port.hpp"

namespace ddprun::testing {

/// The etcd binary, or "" when it is not installed (tests skip then).
inline std::string etcd_binary() {
  for (const char* path : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return {};
}

class EtcdMember {
 public:
  struct Options {
    std::string name = "default";
    std::string host = "127.0.0.1";
    int client_port = 0;  ///< 0: a free loopback port
    int peer_port = 0;
    std::string initial_cluster;  ///< empty: this member alone
    std::vector<std::string> prefix;  ///< run through this first (ip netns exec NS)
    std::filesystem::path data_dir;   ///< empty: a fresh folder under /tmp, removed at the end
    /// Both set: clients speak TLS (https://) with this certificate and key.
    std::string tls_cert, tls_key;
    /// Set: clients must show a certificate this CA signed (--client-cert-auth).
    std::string tls_client_ca;
    std::vector<std::string> extra;  ///< more flags ("--auth-token-ttl", "2")
  };

  explicit EtcdMember(Options options) : options_(std::move(options)) {
    if (options_.client_port == 0) options_.client_port = free_port();
    if (options_.peer_port == 0) options_.peer_port = free_port();
    if (options_.data_dir.empty()) {
      options_.data_dir = std::filesystem::temp_directory_path() /
                          ("ddprun-etcd-" + std::to_string(::getpid()) + "-" + options_.name + "-" +
                           std::to_string(options_.client_port));
      owns_dir_ = true;
    }
    std::filesystem::remove_all(options_.data_dir);
    start();
  }
  EtcdMember() : EtcdMember(Options{}) {}
  ~EtcdMember() {
    stop();
    if (owns_dir_) {
      std::error_code ignored;
      std::filesystem::remove_all(options_.data_dir, ignored);
    }
  }
  EtcdMember(const EtcdMember&) = delete;
  EtcdMember& operator=(const EtcdMember&) = delete;

  /// "127.0.0.1:PORT".
  std::string endpoint() const { return options_.host + ":" + std::to_string(options_.client_port); }
  /// "https://127.0.0.1:PORT" with TLS, "http://..." without.
  std::string client_url() const {
    return (options_.tls_cert.empty() ? "http://" : "https://") + options_.host + ":" +
           std::to_string(options_.client_port);
  }
  std::string peer_url() const { return "http://" + options_.host + ":" + std::to_string(options_.peer_port); }
  const std::string& name() const { return options_.name; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  /// Starts it (again, on the same data: a restarted member rejoins its cluster).
  void start() {
    const std::string client = client_url();
    std::vector<std::string> argv = options_.prefix;
    for (std::string arg :
         {etcd_binary(), std::string("--name"), options_.name, std::string("--data-dir"), options_.data_dir.string(),
          std::string("--listen-client-urls"), client, std::string("--advertise-client-urls"), client,
          std::string("--listen-peer-urls"), peer_url(), std::string("--initial-advertise-peer-urls"), peer_url(),
          std::string("--initial-cluster"),
          options_.initial_cluster.empty() ? options_.name + "=" + peer_url() : options_.initial_cluster,
          std::string("--initial-cluster-state"), std::string("new"), std::string("--log-level"),
          std::string("error"), std::string("--heartbeat-interval"), std::string("100"),
          std::string("--election-timeout"), std::string("1000")}) {
      argv.push_back(arg);
    }
    if (!options_.tls_cert.empty()) {
      for (std::string arg : {std::string("--cert-file"), options_.tls_cert, std::string("--key-file"), options_.tls_key}) {
        argv.push_back(arg);
      }
    }
    argv.insert(argv.end(), options_.extra.begin(), options_.extra.end());
    if (!options_.tls_client_ca.empty()) {
      for (std::string arg : {std::string("--client-cert-auth"), std::string("--trusted-ca-file"), options_.tls_client_ca}) {
        argv.push_back(arg);
      }
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(null, 1);
      const std::string log = (options_.data_dir.parent_path() / (options_.data_dir.filename().string() + ".log")).string();
      const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(err >= 0 ? err : null, 2);
      ::signal(SIGPIPE, SIG_DFL);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
  }

  /// Waits until the client port accepts connections (a single member answers at once; a cluster
  /// member once it has been started); false after `timeout`.
  bool wait_ready(std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (accepts()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  void signal(int signo) const {
    if (pid_ > 0) ::kill(pid_, signo);
  }

  /// SIGTERM, then SIGKILL after 5 s; reaps it.
  void stop() { end(SIGTERM); }
  /// SIGKILL at once; reaps it.
  void kill() { end(SIGKILL); }

 private:
  bool accepts() const {
    // Inside a namespace the port is not reachable from here: a running process is all we know.
    if (!options_.prefix.empty()) return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(options_.client_port));
    ::inet_pton(AF_INET, options_.host.c_str(), &address.sin_addr);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    return ok;
  }

  void end(int signo) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, signo);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  Options options_;
  bool owns_dir_ = false;
  pid_t pid_ = -1;
};

}  // namespace ddprun::testing

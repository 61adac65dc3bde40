#pragma once
/// SshdFleet: OpenSSH's sshd (Debian openssh-server) in nodes of a NetnsLab, for the --hostfile
/// tests and benchmark. Everything is its own: keys generated into a folder the caller gives (a
/// client key, a host key, authorized_keys), an sshd_config per node (StrictModes off, no PAM, no
/// passwords, its own pid file), sshd run in the foreground so that its pid is known. Nothing of
/// /etc/ssh or ~/.ssh is touched; the one thing outside the folder is /run/sshd, sshd's compiled-in
/// privilege-separation folder, made when missing (it holds nothing).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "netns_lab.hpp"

namespace ddprun::testing {

class SshdFleet {
 public:
  static constexpr const char* kSshd = "/usr/sbin/sshd";
  static constexpr const char* kSsh = "/usr/bin/ssh";
  static constexpr const char* kKeygen = "/usr/bin/ssh-keygen";

  /// Starts sshd on each of `nodes` and checks that ssh from `from` (a node of the lab) logs in to
  /// each. Null with `why_not` when it cannot (no openssh-server, a key that cannot be made, an
  /// sshd that does not answer).
  static std::unique_ptr<SshdFleet> start(const NetnsLab& lab, const std::vector<int>& nodes, int from,
                                          const std::filesystem::path& dir, std::string& why_not) {
    for (const char* binary : {kSshd, kSsh, kKeygen}) {
      if (::access(binary, X_OK) != 0) {
        why_not = std::string(binary) + " is missing (Debian openssh-server / openssh-client; scripts/setup.sh --tests installs them)";
        return nullptr;
      }
    }
    std::unique_ptr<SshdFleet> fleet(new SshdFleet(lab, dir));
    for (const char* key : {"client_key", "host_key"}) {
      auto made = run_command({kKeygen, "-q", "-t", "ed25519", "-N", "", "-f", (dir / key).string()});
      if (made.status != 0) {
        why_not = "ssh-keygen failed: " + made.output;
        return nullptr;
      }
    }
    std::filesystem::copy_file(dir / "client_key.pub", dir / "authorized_keys");
    ::mkdir("/run/sshd", 0755);
    for (int node : nodes) fleet->launch(node);
    for (int node : nodes) {
      CommandResult last;
      bool in = false;
      for (int attempt = 0; attempt < 40 && !in; ++attempt) {
        last = run_command(lab.in_node(from, fleet->ssh_command(node, "true")));
        in = last.status == 0;
        if (!in) std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
      if (!in) {
        why_not = "sshd on " + lab.address(node) + " does not let ssh in: " + last.output;
        return nullptr;
      }
    }
    return fleet;
  }

  /// Ends every process left in the nodes' namespaces (sshd's sessions too), then sshd itself.
  ~SshdFleet() {
    for (int node : nodes_) kill_all_in(node);
    for (const auto& entry : sshd_) {
      ::kill(entry.second, SIGKILL);
      ::waitpid(entry.second, nullptr, 0);
    }
  }
  SshdFleet(const SshdFleet&) = delete;
  SshdFleet& operator=(const SshdFleet&) = delete;

  /// The --ssh-option values that make ddprun's ssh use this fleet's key and trust its hosts.
  std::vector<std::string> ssh_options() const {
    return {"IdentityFile=" + (dir_ / "client_key").string(), "IdentitiesOnly=yes", "UserKnownHostsFile=/dev/null",
            "GlobalKnownHostsFile=/dev/null", "StrictHostKeyChecking=no", "LogLevel=ERROR"};
  }

  /// `ssh OPTIONS ADDRESS COMMAND`, as a user would type it with this fleet's options.
  std::vector<std::string> ssh_command(int node, const std::string& command) const {
    std::vector<std::string> argv{kSsh, "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"};
    for (const auto& option : ssh_options()) {
      argv.push_back("-o");
      argv.push_back(option);
    }
    argv.push_back(lab_.address(node));
    argv.push_back(command);
    return argv;
  }

  /// Stops the node's sshd (a host that is down for ssh).
  void stop(int node) {
    auto it = std::find_if(sshd_.begin(), sshd_.end(), [&](const auto& entry) { return entry.first == node; });
    if (it == sshd_.end()) return;
    ::kill(it->second, SIGKILL);
    ::waitpid(it->second, nullptr, 0);
    sshd_.erase(it);
  }

  /// The pids of the job in the node's namespace: every process there but sshd's own.
  std::vector<pid_t> job_processes(int node) const {
    std::vector<pid_t> pids;
    auto listed = run_command({lab_ip(), "netns", "pids", lab_.namespace_name(node)});
    for (const auto& line : split(listed.output)) {
      pid_t pid = static_cast<pid_t>(std::atol(line.c_str()));
      if (pid <= 1) continue;
      std::error_code ec;
      auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
      if (ec || exe == kSshd) continue;  // gone already, or sshd and its sessions
      pids.push_back(pid);
    }
    return pids;
  }

  /// What job_processes(node) finds, as text for a failure message ("pid exe" per line).
  static std::string describe(const std::vector<pid_t>& pids) {
    std::string text;
    for (pid_t pid : pids) {
      std::error_code ec;
      text += std::to_string(pid) + " " + std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string() + "\n";
    }
    return text;
  }

 private:
  SshdFleet(const NetnsLab& lab, std::filesystem::path dir) : lab_(lab), dir_(std::move(dir)) {}

  static std::string lab_ip() { return ip_binary(); }

  static std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> lines;
    std::string line;
    for (char c : text) {
      if (c == '\n') {
        lines.push_back(line);
        line.clear();
      } else {
        line += c;
      }
    }
    if (!line.empty()) lines.push_back(line);
    return lines;
  }

  void launch(int node) {
    const auto config = dir_ / ("sshd_config_" + std::to_string(node));
    {
      std::ofstream out(config);
      out << "Port 22\nListenAddress " << lab_.address(node) << "\nHostKey " << (dir_ / "host_key").string()
          << "\nAuthorizedKeysFile " << (dir_ / "authorized_keys").string() << "\nPidFile "
          << (dir_ / ("sshd_" + std::to_string(node) + ".pid")).string()
          << "\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
             "PermitRootLogin prohibit-password\nClientAliveInterval 2\nClientAliveCountMax 3\nMaxStartups 100\n"
             "MaxSessions 100\nLogLevel ERROR\n";
    }
    std::vector<std::string> argv = lab_.in_node(node, {kSshd, "-D", "-e", "-f", config.string()});
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      std::vector<char*> args;
      for (auto& arg : argv) args.push_back(arg.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    nodes_.push_back(node);
    if (pid > 0) sshd_.emplace_back(node, pid);
  }

  void kill_all_in(int node) const {
    auto listed = run_command({lab_ip(), "netns", "pids", lab_.namespace_name(node)});
    for (const auto& line : split(listed.output)) {
      pid_t pid = static_cast<pid_t>(std::atol(line.c_str()));
      if (pid > 1) ::kill(pid, SIGKILL);
    }
  }

  const NetnsLab& lab_;
  std::filesystem::path dir_;
    std::vector<int> nodes_;                    ///< every node sshd was started on
  std::vector<std::pair<int, pid_t>> sshd_;   ///< node -> its sshd's pid, while it runs
};

}  // namespace ddprun::testing

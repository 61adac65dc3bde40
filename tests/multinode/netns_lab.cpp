#include "netns_lab.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace ddprun::testing {
namespace {

std::atomic<int> labs_made{0};

}  // namespace

std::string ip_binary() {
  for (const char* candidate : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return {};
}

namespace {

/// A pid that no longer exists: its lab is stale. kill(pid, 0) fails with ESRCH only then.
bool pid_gone(const std::string& text) {
  pid_t pid = static_cast<pid_t>(std::stol(text));
  return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

std::string describe(const std::vector<std::string>& argv, const CommandResult& result) {
  std::string text;
  for (const auto& arg : argv) text += (text.empty() ? "" : " ") + arg;
  return "`" + text + "` exited " + std::to_string(result.status) + ": " + result.output;
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult result;
  std::array<int, 2> pipe{};
  if (::pipe2(pipe.data(), O_CLOEXEC) != 0) return result;
  std::vector<std::string> strings = argv;
  std::vector<char*> args;
  for (auto& s : strings) args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipe[0]);
    ::close(pipe[1]);
    return result;
  }
  if (pid == 0) {
    ::dup2(pipe[1], STDOUT_FILENO);
    ::dup2(pipe[1], STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, STDIN_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipe[1]);
  std::array<char, 4096> buffer{};
  for (;;) {
    ssize_t n = ::read(pipe[0], buffer.data(), buffer.size());
    if (n > 0) {
      result.output.append(buffer.data(), static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return result;
}

std::string netns_and_links() {
  const std::string ip = ip_binary();
  return run_command({ip, "netns", "list"}).output + run_command({ip, "-o", "link", "show"}).output;
}

void NetnsLab::remove_stale(const std::string& ip) {
  static const std::regex namespace_pattern(R"(^ddpmn(\d+)x\d+n\d+)");
  static const std::regex link_pattern(R"(^\d+:\s+(dm[bh](\d+)x\d+(n\d+)?)[@:])");
  std::istringstream namespaces(run_command({ip, "netns", "list"}).output);
  for (std::string line; std::getline(namespaces, line);) {
    std::smatch match;
    if (std::regex_search(line, match, namespace_pattern) && pid_gone(match[1])) {
      run_command({ip, "netns", "delete", line.substr(0, line.find(' '))});
    }
  }
  std::istringstream links(run_command({ip, "-o", "link", "show"}).output);
  for (std::string line; std::getline(links, line);) {
    std::smatch match;
    if (std::regex_search(line, match, link_pattern) && pid_gone(match[2])) {
      run_command({ip, "link", "delete", match[1]});
    }
  }
}

std::unique_ptr<NetnsLab> NetnsLab::create(int nodes, std::string& why_not) {
  if (::geteuid() != 0) {
    why_not = "network namespaces need root (this test runs as uid " + std::to_string(::geteuid()) + ")";
    return nullptr;
  }
  std::string ip = ip_binary();
  if (ip.empty()) {
    why_not = "iproute2's `ip` was not found (/usr/sbin/ip, /sbin/ip, /usr/bin/ip, /bin/ip)";
    return nullptr;
  }
  remove_stale(ip);

  std::unique_ptr<NetnsLab> lab(new NetnsLab());
  lab->ip_ = ip;
  const int pid = static_cast<int>(::getpid());
  const int serial = labs_made++;
  const std::string tag = std::to_string(pid) + "x" + std::to_string(serial);
  const int subnet = (pid + serial) % 250 + 1;  // cosmetic: the bridge is private, the host has no address on it
  auto step = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv{ip};
    argv.insert(argv.end(), args.begin(), args.end());
    CommandResult result = run_command(argv);
    if (result.status != 0) throw std::runtime_error(describe(argv, result));
  };
  try {
    lab->bridge_ = "dmb" + tag;
    step({"link", "add", lab->bridge_, "type", "bridge"});
    step({"link", "set", lab->bridge_, "up"});
    for (int node = 0; node < nodes; ++node) {
      const std::string ns = "ddpmn" + tag + "n" + std::to_string(node);
      const std::string host_side = "dmh" + tag + "n" + std::to_string(node);
      const std::string inner = "dmp" + tag + "n" + std::to_string(node);
      const std::string address = "10.213." + std::to_string(subnet) + "." + std::to_string(node + 1);
      step({"netns", "add", ns});
      lab->namespaces_.push_back(ns);
      step({"link", "add", host_side, "type", "veth", "peer", "name", inner});
      lab->host_veths_.push_back(host_side);
      step({"link", "set", inner, "netns", ns});
      step({"link", "set", host_side, "master", lab->bridge_});
      step({"link", "set", host_side, "up"});
      step({"-n", ns, "link", "set", inner, "name", "eth0"});
      step({"-n", ns, "addr", "add", address + "/24", "dev", "eth0"});
      step({"-n", ns, "link", "set", "eth0", "up"});
      step({"-n", ns, "link", "set", "lo", "up"});
      lab->addresses_.push_back(address);
    }
  } catch (const std::exception& error) {
    why_not = std::string("cannot build the network-namespace lab: ") + error.what();
    return nullptr;  // the destructor removes what was made
  }
  return lab;
}

NetnsLab::~NetnsLab() {
  // The host-side veth takes its peer along; deleting it first does not wait for the namespace's
  // asynchronous cleanup.
  for (const auto& veth : host_veths_) run_command({ip_, "link", "delete", veth});
  for (const auto& ns : namespaces_) run_command({ip_, "netns", "delete", ns});
  if (!bridge_.empty()) run_command({ip_, "link", "delete", bridge_});
}

std::vector<std::string> NetnsLab::in_node(int node, const std::vector<std::string>& command) const {
  std::vector<std::string> argv{ip_, "netns", "exec", namespaces_.at(node)};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

void NetnsLab::cut(int node) {
  CommandResult result = run_command({ip_, "link", "set", host_veths_.at(node), "down"});
  if (result.status != 0) throw std::runtime_error("cannot cut node " + std::to_string(node) + ": " + result.output);
}

void NetnsLab::restore(int node) {
  CommandResult result = run_command({ip_, "link", "set", host_veths_.at(node), "up"});
  if (result.status != 0)
    throw std::runtime_error("cannot restore node " + std::to_string(node) + ": " + result.output);
}

std::vector<std::string> NetnsLab::names() const {
  std::vector<std::string> all = namespaces_;
  all.insert(all.end(), host_veths_.begin(), host_veths_.end());
  if (!bridge_.empty()) all.push_back(bridge_);
  return all;
}

}  // namespace ddprun::testing

#include "slurm_cluster.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

extern char** environ;

namespace ddprun::testing {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::atomic<int> clusters_made{0};

const char* const kMunged = "/usr/sbin/munged";
const char* const kSlurmctld = "/usr/sbin/slurmctld";
const char* const kSlurmd = "/usr/sbin/slurmd";
const char* const kNsenter = "/usr/bin/nsenter";
const char* const kUnshare = "/usr/bin/unshare";
const char* const kEnv = "/usr/bin/env";
const std::string kFolderPrefix = "/tmp/ddprun-slurm-";

/// Why the pieces cannot run here; empty when they can.
std::string missing_pieces(bool lab) {
  if (::geteuid() != 0) return "Slurm's daemons run as root here (SlurmUser=root); this test runs as uid " +
                               std::to_string(::geteuid());
  std::vector<const char*> needed{kMunged, kSlurmctld, kSlurmd, "/usr/bin/srun", "/usr/bin/sinfo", kEnv};
  if (lab) {
    needed.push_back(kNsenter);
    needed.push_back(kUnshare);
  }
  for (const char* path : needed) {
    if (::access(path, X_OK) != 0) return std::string(path) + " is missing (Debian slurmctld, slurmd, slurm-client, munge: scripts/setup.sh --tests)";
  }
  return {};
}

/// A TCP port nothing listens on now (bound to every address, as slurmd binds).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof addr;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

void write_text(const fs::path& path, const std::string& text, fs::perms mode = fs::perms::owner_read | fs::perms::owner_write) {
  std::ofstream(path) << text;
  fs::permissions(path, mode);
}

/// The entries of /proc/<pid>/environ, empty when unreadable (gone, a zombie).
std::vector<std::string> environment_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::vector<std::string> entries;
  for (std::string entry; std::getline(in, entry, '\0');) entries.push_back(entry);
  return entries;
}

/// Every process but this one whose environment has an entry for which `match` holds.
template <typename Match>
std::vector<pid_t> processes_with(Match match) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid <= 1 || pid == ::getpid()) continue;
    for (const auto& variable : environment_of(pid)) {
      if (match(variable)) {
        pids.push_back(pid);
        break;
      }
    }
  }
  return pids;
}

/// SIGKILLs what `find` returns until it returns nothing (at most 10 s).
template <typename Find>
void kill_until_gone(Find find) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
    auto pids = find();
    if (pids.empty()) return;
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(100ms);
  }
}

/// Clusters of test processes that are gone: their processes, then their folders.
void remove_stale() {
  static const std::regex folder(R"(^ddprun-slurm-(\d+)-\d+$)");
  auto gone = [](const std::string& pid_text) {
    pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
  };
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/tmp", ec)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, match, folder) || !gone(match[1])) continue;
    const std::string marker = "SLURM_CONF=" + entry.path().string() + "/slurm.conf";
    kill_until_gone([&] { return processes_with([&](const std::string& v) { return v == marker; }); });
    fs::remove_all(entry.path(), ec);
  }
}

std::string tail_of(const fs::path& path, std::size_t bytes = 3000) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
}

}  // namespace

pid_t SlurmCluster::spawn(const std::vector<std::string>& argv, const std::string& log_name) {
  const std::string log = dir_ + "/log/" + log_name;
  const std::string marker = "SLURM_CONF=" + conf_;
  pid_t pid = ::fork();
  if (pid != 0) {
    if (pid > 0) daemons_.push_back(pid);
    return pid;
  }
  // The child: its own session, the cluster's marker in its environment, output to its log, and
  // SIGKILL when the test process dies (a crash leaves no daemon running).
  ::setsid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  int in = ::open("/dev/null", O_RDONLY);
  ::dup2(in, STDIN_FILENO);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(out, STDERR_FILENO);
  ::putenv(const_cast<char*>(marker.c_str()));
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  ::execve(args[0], args.data(), environ);
  ::_exit(127);
}

bool SlurmCluster::start_munge(std::string& why_not) {
  const std::string munge = dir_ + "/munge";
  fs::create_directories(munge);
  fs::permissions(munge, fs::perms::owner_all);
  std::string key(1024, '\0');
  std::random_device device;
  for (auto& byte : key) byte = static_cast<char>(device());
  write_text(munge + "/munge.key", key, fs::perms::owner_read);
  spawn({kMunged, "--foreground", "--force", "--socket=" + munge + "/socket", "--key-file=" + munge + "/munge.key",
         "--log-file=" + munge + "/munged.log", "--pid-file=" + munge + "/munged.pid",
         "--seed-file=" + munge + "/munged.seed"},
        "munged.out");
  for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
    if (fs::exists(munge + "/socket")) return true;
    std::this_thread::sleep_for(50ms);
  }
  why_not = "munged did not create its socket within 10 s: " + tail_of(munge + "/munged.log") +
            tail_of(dir_ + "/log/munged.out");
  return false;
}

std::vector<std::string> SlurmCluster::client(const std::vector<std::string>& command) const {
  std::vector<std::string> argv;
  if (lab_ != nullptr) argv = {kNsenter, "--net=/run/netns/" + lab_->namespace_name(0)};
  argv.push_back(kEnv);
  argv.push_back("SLURM_CONF=" + conf_);
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

bool SlurmCluster::wait_until_idle(std::string& why_not) {
  std::string last;
  for (auto deadline = std::chrono::steady_clock::now() + 40s; std::chrono::steady_clock::now() < deadline;) {
    for (pid_t pid : daemons_) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        why_not = "a Slurm daemon (pid " + std::to_string(pid) + ") exited " + std::to_string(status) + " while starting: " +
                  logs();
        return false;
      }
    }
    CommandResult result = run_command(client({"sinfo", "-h", "-N", "-o", "%N %t"}));
    last = result.output;
    std::istringstream lines(result.output);
    std::size_t idle = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.ends_with(" idle")) ++idle;
    }
    if (result.status == 0 && idle == node_names_.size()) return true;
    std::this_thread::sleep_for(250ms);
  }
  why_not = "the Slurm nodes were not idle within 40 s (sinfo: " + last + "): " + logs();
  return false;
}

namespace {

/// slurm.conf of a cluster in `dir`: the controller `controller` at `controller_addr`, `nodes` as
/// NAME -> ADDR. Plugins that need nothing from the machine: processes tracked by /proc
/// (proctrack/linuxproc), no task binding (task/none), no cgroups, no accounting, no MPI.
std::string slurm_conf(const std::string& dir, const std::string& controller, const std::string& controller_addr,
                       int controller_port, int slurmd_port,
                       const std::vector<std::pair<std::string, std::string>>& nodes, int gpus_per_node = 0) {
  std::string conf =
      "ClusterName=ddprun\n"
      "SlurmctldHost=" + controller + "(" + controller_addr + ")\n"
      "SlurmctldPort=" + std::to_string(controller_port) + "\n"
      "SlurmdPort=" + std::to_string(slurmd_port) + "\n"
      "SlurmUser=root\nSlurmdUser=root\n"
      "AuthType=auth/munge\nCredType=cred/munge\n"
      "AuthInfo=socket=" + dir + "/munge/socket\n"
      "StateSaveLocation=" + dir + "/state\n"
      "SlurmdSpoolDir=" + dir + "/spool/%n\n"
      "SlurmctldPidFile=" + dir + "/slurmctld.pid\n"
      "SlurmdPidFile=" + dir + "/slurmd-%n.pid\n"
      "SlurmctldLogFile=" + dir + "/log/slurmctld.log\n"
      "SlurmdLogFile=" + dir + "/log/slurmd-%n.log\n"
      "PlugStackConfig=" + dir + "/plugstack.conf\n"
      "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSwitchType=switch/none\nMpiDefault=none\n"
      "SchedulerType=sched/builtin\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
      "SlurmdParameters=config_overrides\nReturnToService=2\nKillWait=5\nInactiveLimit=0\n"
      "JobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none\n";
  if (gpus_per_node > 0) conf += "GresTypes=gpu\n";
  const std::string gres = gpus_per_node > 0 ? " Gres=gpu:" + std::to_string(gpus_per_node) : "";
  for (const auto& [name, addr] : nodes) conf += "NodeName=" + name + " NodeAddr=" + addr + " CPUs=2" + gres + " State=UNKNOWN\n";
  conf += "PartitionName=ddprun Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
  return conf;
}

/// The folder of a new cluster, with what every daemon expects to exist.
std::string make_folder(const std::vector<std::string>& nodes) {
  const std::string dir =
      kFolderPrefix + std::to_string(::getpid()) + "-" + std::to_string(clusters_made++);
  fs::remove_all(dir);
  for (const char* sub : {"state", "log", "munge"}) fs::create_directories(dir + "/" + sub);
  for (const auto& node : nodes) fs::create_directories(dir + "/spool/" + node);
  write_text(dir + "/plugstack.conf", "");
  return dir;
}

}  // namespace

std::unique_ptr<SlurmCluster> SlurmCluster::start_local(std::string& why_not) {
  why_not = missing_pieces(false);
  if (!why_not.empty()) return nullptr;
  remove_stale();
  char host[HOST_NAME_MAX + 1] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string name = host;  // slurmctld runs only where its hostname is SlurmctldHost's
  std::unique_ptr<SlurmCluster> cluster(new SlurmCluster());
  cluster->node_names_ = {name};
  cluster->dir_ = make_folder(cluster->node_names_);
  cluster->conf_ = cluster->dir_ + "/slurm.conf";
  write_text(cluster->conf_, slurm_conf(cluster->dir_, name, "127.0.0.1", free_port(), free_port(), {{name, "127.0.0.1"}}),
             fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  if (!cluster->start_munge(why_not)) return nullptr;
  cluster->spawn({kSlurmctld, "-D", "-i", "-f", cluster->conf_}, "slurmctld.out");
  cluster->spawn({kSlurmd, "-D", "-N", name, "-f", cluster->conf_}, "slurmd.out");
  if (!cluster->wait_until_idle(why_not)) return nullptr;
  return cluster;
}

std::unique_ptr<SlurmCluster> SlurmCluster::start_in_lab(const NetnsLab& lab, std::string& why_not, int gpus_per_node) {
  why_not = missing_pieces(true);
  if (!why_not.empty()) return nullptr;
  if (lab.size() < 2) {
    why_not = "a Slurm lab needs a controller node and at least one compute node";
    return nullptr;
  }
  remove_stale();
  std::unique_ptr<SlurmCluster> cluster(new SlurmCluster());
  cluster->lab_ = &lab;
  std::vector<std::pair<std::string, std::string>> nodes;
  std::string hosts = "127.0.0.1 localhost\n" + lab.address(0) + " dsctl\n";
  for (int i = 1; i < lab.size(); ++i) {
    const std::string name = "dsn" + std::to_string(i);
    cluster->node_names_.push_back(name);
    nodes.emplace_back(name, lab.address(i));
    hosts += lab.address(i) + " " + name + "\n";
  }
  cluster->dir_ = make_folder(cluster->node_names_);
  cluster->conf_ = cluster->dir_ + "/slurm.conf";
  const auto readable = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read;
  write_text(cluster->conf_, slurm_conf(cluster->dir_, "dsctl", lab.address(0), 6817, 6818, nodes, gpus_per_node),
             readable);
  if (gpus_per_node > 0) {
    // gres.conf beside slurm.conf: each node's GPUs as device files Slurm numbers 0..N-1.
    fs::create_directories(cluster->dir_ + "/dev");
    std::string gres;
    for (int gpu = 0; gpu < gpus_per_node; ++gpu) {
      const std::string device = cluster->dir_ + "/dev/gpu" + std::to_string(gpu);
      if (::mknod(device.c_str(), S_IFCHR | 0600, ::makedev(1, 3)) != 0) {
        why_not = "cannot make the stand-in GPU device " + device + ": " + std::strerror(errno);
        return nullptr;
      }
    }
    for (const auto& [name, addr] : nodes) {
      gres += "NodeName=" + name + " Name=gpu File=" + cluster->dir_ + "/dev/gpu[0-" + std::to_string(gpus_per_node - 1) +
              "]\n";
    }
    write_text(cluster->dir_ + "/gres.conf", gres, readable);
  }
  write_text(cluster->dir_ + "/hosts", hosts, readable);
  if (!cluster->start_munge(why_not)) return nullptr;
  // nsenter enters the network namespace only: `ip netns exec` would also mount a sysfs of that
  // namespace over /sys, hiding /sys/fs/cgroup, without which Debian's slurmd 22.05 refuses to start.
  const std::string net0 = "--net=/run/netns/" + lab.namespace_name(0);
  cluster->spawn({kNsenter, net0, kUnshare, "--uts", "/bin/sh", "-c",
                  "hostname dsctl && exec " + std::string(kSlurmctld) + " -D -i -f " + cluster->conf_},
                 "slurmctld.out");
  for (int i = 1; i < lab.size(); ++i) {
    const std::string& name = cluster->node_names_[static_cast<std::size_t>(i - 1)];
    cluster->spawn({kNsenter, "--net=/run/netns/" + lab.namespace_name(i), kUnshare, "--uts", "--mount", "/bin/sh",
                    "-c",
                    "mount --bind " + cluster->dir_ + "/hosts /etc/hosts && hostname " + name + " && exec " +
                        std::string(kSlurmd) + " -D -N " + name + " -f " + cluster->conf_},
                   "slurmd-" + name + ".out");
  }
  if (!cluster->wait_until_idle(why_not)) return nullptr;
  return cluster;
}

std::string SlurmCluster::logs() const {
  std::string text;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_ + "/log", ec)) {
    text += "\n---- " + entry.path().filename().string() + ":\n" + tail_of(entry.path(), 1500);
  }
  return text;
}

void SlurmCluster::stop_everything() {
  const std::string marker = "SLURM_CONF=" + conf_;
  // Steps and their tasks first (their slurmstepd, ddprun and workers carry the marker too), then
  // the daemons; the daemons are our children and are reaped.
  kill_until_gone([&] { return processes_with([&](const std::string& v) { return v == marker; }); });
  for (pid_t pid : daemons_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  daemons_.clear();
  kill_until_gone([&] { return processes_with([&](const std::string& v) { return v == marker; }); });
}

SlurmCluster::~SlurmCluster() {
  stop_everything();
  std::error_code ec;
  if (!dir_.empty() && std::getenv("DDPRUN_TEST_KEEP_SLURM") == nullptr) fs::remove_all(dir_, ec);
}

}  // namespace ddprun::testing

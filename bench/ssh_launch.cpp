// ssh_launch: a job of 3 hosts x 2 workers started from one machine over ssh, two ways, in the same
// run (issue 14): `ddprun --hostfile` against what users do today, one ssh per host running
// torchrun-anchor with static rendezvous. Hosts are network namespaces running OpenSSH's sshd
// (tests/multinode: NetnsLab, SshdFleet); the launching machine is a fourth namespace. Needs root.
//
// Each worker writes the wall clock (ns) as it starts and exits 0. Per run and way:
//   running  the last worker's start - the command's start
//   exit     the command's end (every ssh's, for the anchor) - its start
//
//   ssh_launch --ddprun DDPRUN --anchor ANCHOR [--runs N]
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "netns_lab.hpp"
#include "sshd_fleet.hpp"

using namespace ddprun::testing;

namespace {

constexpr int kHosts = 3;
constexpr int kLauncher = 3;
constexpr int kNproc = 2;

double now_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);  // the workers' `date +%s%N`: the same clock in every namespace
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

pid_t spawn(const std::vector<std::string>& argv) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Timing {
  double running = 0, exit = 0;
  bool ok = false;
};

/// The last start the workers of `tag` wrote, or 0 when one is missing.
double last_start(const std::filesystem::path& dir, const std::string& tag) {
  double last = 0;
  for (int rank = 0; rank < kHosts * kNproc; ++rank) {
    std::ifstream in(dir / (tag + "_" + std::to_string(rank)));
    long long ns = 0;
    if (!(in >> ns)) return 0;
    last = std::max(last, static_cast<double>(ns) * 1e-9);
  }
  return last;
}

Timing finish(const std::filesystem::path& dir, const std::string& tag, double start, bool ok) {
  Timing t;
  t.exit = now_s() - start;
  double last = last_start(dir, tag);
  t.ok = ok && last > 0;
  t.running = last - start;
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string ddprun, anchor;
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--ddprun") ddprun = argv[i + 1];
    else if (flag == "--anchor") anchor = argv[i + 1];
    else if (flag == "--runs") runs = std::atoi(argv[i + 1]);
  }
  if (ddprun.empty() || anchor.empty()) {
    std::cerr << "usage: ssh_launch --ddprun DDPRUN --anchor ANCHOR [--runs N]\n";
    return 2;
  }
  std::string why_not;
  auto lab = NetnsLab::create(kHosts + 1, why_not);
  if (!lab) {
    std::cerr << "ssh_launch: " << why_not << "\n";
    return 1;
  }
  char pattern[] = "/tmp/ddprun-ssh-bench-XXXXXX";
  std::filesystem::path dir = ::mkdtemp(pattern);
  std::filesystem::create_directory(dir / "keys");
  int status = 1;
  {
    auto fleet = SshdFleet::start(*lab, {0, 1, 2}, kLauncher, dir / "keys", why_not);
    if (!fleet) {
      std::cerr << "ssh_launch: " << why_not << "\n";
    } else {
      const std::string worker = (dir / "worker").string();
      {
        std::ofstream out(worker);
        out << "#!/bin/sh\ndate +%s%N > \"" << dir.string() << "/$1_$RANK\"\n";
      }
      std::filesystem::permissions(worker, std::filesystem::perms::owner_all);
      const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
      std::string hostfile = (dir / "hostfile").string();
      {
        std::ofstream out(hostfile);
        for (int node = 0; node < kHosts; ++node) out << lab->address(node) << " slots=" << kNproc << "\n";
      }
      std::vector<double> d_run, d_exit, a_run, a_exit;
      for (int run = 0; run < runs; ++run) {
        // Alternate which goes first, so that neither always meets a warmer machine.
        for (int which = 0; which < 2; ++which) {
          const bool use_ddprun = (which + run) % 2 == 0;
          const std::string tag = (use_ddprun ? "d" : "a") + std::to_string(run);
          const int port = 29500 + 2 * run + (use_ddprun ? 0 : 1);
          double start = now_s();
          bool ok = true;
          if (use_ddprun) {
            std::vector<std::string> command{ddprun, "--hostfile", hostfile, "--master-port=" + std::to_string(port)};
            for (const auto& option : fleet->ssh_options()) command.push_back("--ssh-option=" + option);
            command.insert(command.end(), {worker, tag});
            ok = wait_for(spawn(lab->in_node(kLauncher, command))) == 0;
          } else {
            std::vector<pid_t> pids;
            for (int node = 0; node < kHosts; ++node) {
              std::string remote = "cd " + dir.string() + " && exec env PATH='" + path + "' /usr/bin/python3 " + anchor +
                                   " --nnodes=" + std::to_string(kHosts) + " --node_rank=" + std::to_string(node) +
                                   " --master_addr=" + lab->address(0) + " --master_port=" + std::to_string(port) +
                                   " --nproc_per_node=" + std::to_string(kNproc) + " --no_python " + worker + " " + tag;
              pids.push_back(spawn(lab->in_node(kLauncher, fleet->ssh_command(node, remote))));
            }
            for (pid_t pid : pids) ok = wait_for(pid) == 0 && ok;
          }
          Timing t = finish(dir, tag, start, ok);
          std::printf("run %d %-6s running %.2f s  exit %.2f s%s\n", run, use_ddprun ? "ddprun" : "anchor", t.running,
                      t.exit, t.ok ? "" : "  FAILED");
          std::fflush(stdout);
          if (!t.ok) continue;
          (use_ddprun ? d_run : a_run).push_back(t.running);
          (use_ddprun ? d_exit : a_exit).push_back(t.exit);
        }
      }
      if (!d_run.empty() && !a_run.empty()) {
        // ratio = anchor / ddprun, as every benchmark here prints it: above 1, ddprun is faster.
        std::printf("ssh_launch_3x2  median of %zu/%zu runs: to all workers running ddprun %.2f s, anchor %.2f s, "
                    "ratio %.2fx; to exit ddprun %.2f s, anchor %.2f s, ratio %.2fx\n",
                    d_run.size(), a_run.size(), median(d_run), median(a_run), median(a_run) / median(d_run),
                    median(d_exit), median(a_exit), median(a_exit) / median(d_exit));
        status = d_run.size() == static_cast<std::size_t>(runs) && a_run.size() == static_cast<std::size_t>(runs) ? 0 : 1;
      }
    }
  }
  std::filesystem::remove_all(dir);
  return status;
}

// A job launched over ssh from one command (--hostfile): OpenSSH's sshd in three network
// namespaces (SshdFleet), the launching ddprun in a fourth, which is not one of the hosts. Needs
// root and openssh-server; skips with the reason otherwise.
//
// The bounds only prove "no hang"; what is checked is what the user sees (exit status, the lines
// naming hosts) and what is left running in each host's namespace (nothing of the job, ever).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "harness.hpp"
#include "multinode_support.hpp"
#include "netns_lab.hpp"
#include "sshd_fleet.hpp"

using namespace ddprun::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kHosts = 3;
constexpr int kLauncher = 3;  ///< the launching machine's node: not in the hostfile
const std::string kConf = "keep_alive_interval=0.5,keep_alive_max_attempt=3,read_timeout=5,join_timeout=60";

/// A lab of kHosts hosts running sshd and one launching node; skips the test when it cannot be had.
#define MAKE_SSH_LAB(lab, fleet, keys)                                                       \
  std::string why_not;                                                                       \
  auto lab = NetnsLab::create(kHosts + 1, why_not);                                          \
  if (!lab) GTEST_SKIP() << why_not;                                                         \
  TempDir keys;                                                                              \
  auto fleet = SshdFleet::start(*lab, {0, 1, 2}, kLauncher, keys.path(), why_not);           \
  if (!fleet) GTEST_SKIP() << why_not

/// A hostfile of the lab's hosts, `slots` each, with a comment, as users write one.
std::string write_hostfile(const TempDir& dir, const NetnsLab& lab, const std::vector<std::string>& extra = {}) {
  auto path = dir.path() / "hostfile";
  std::ofstream out(path);
  out << "# the lab's machines\n";
  for (int node = 0; node < kHosts; ++node) out << lab.address(node) << " slots=2\n";
  for (const auto& line : extra) out << line << "\n";
  return path.string();
}

/// `ddprun --hostfile FILE --ssh-option ... ARGS`, run on the launching node.
std::vector<std::string> launcher_argv(const NetnsLab& lab, const SshdFleet& fleet, const std::string& hostfile,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> command{ddprun_binary(), "--hostfile", hostfile};
  for (const auto& option : fleet.ssh_options()) command.push_back("--ssh-option=" + option);
  command.insert(command.end(), args.begin(), args.end());
  return lab.in_node(kLauncher, command);
}

/// The job's launcher with short ssh timings, so that a cut link is noticed in about 3 s.
const std::map<std::string, std::string> kShortTimeouts{{"DDPRUN_SSH_ALIVE_TIMEOUT", "3"}, {"DDPRUN_SSH_CONNECT_TIMEOUT", "3"}};

/// Whether, within `timeout`, no process of the job is left in any host's namespace; `left` says
/// which were when some were.
bool nothing_left(const SshdFleet& fleet, std::chrono::milliseconds timeout, std::string& left) {
  bool clean = eventually(
      [&] {
        for (int node = 0; node < kHosts; ++node) {
          if (!fleet.job_processes(node).empty()) return false;
        }
        return true;
      },
      timeout);
  left.clear();
  for (int node = 0; node < kHosts; ++node) left += SshdFleet::describe(fleet.job_processes(node));
  return clean;
}

/// A worker that leaves DIR/started_<RANK> and sleeps until it is stopped.
std::string sleeper(const TempDir& dir) {
  return write_script(dir, "sleeper", "touch \"" + dir.str() + "/started_$RANK\"\nexec sleep 600\n");
}

std::vector<std::string> all_started(int world) {
  std::vector<std::string> names;
  for (int rank = 0; rank < world; ++rank) names.push_back("started_" + std::to_string(rank));
  return names;
}

TEST(HostfileOverSsh, ThreeHostsTimesTwoWorkersTrain) {
  MAKE_SSH_LAB(lab, fleet, keys);
  TempDir dir;
  std::vector<std::string> args{"--rdzv-conf=" + kConf, "--verbose", plain_sgd_binary(), "--epochs", "1"};
  for (const auto& arg : plain_sgd_args()) args.push_back(arg);
  Launch launch(Launch::Command{launcher_argv(*lab, *fleet, write_hostfile(dir, *lab), args)}, kShortTimeouts);
  Outcome outcome = launch.wait(120s);
  EXPECT_EQ(outcome.exit_status, 0) << outcome.out << outcome.err;
  EXPECT_EQ(plain_sgd_missing(outcome.out, 6), "") << outcome.out << outcome.err;
  // Every host's lines reach this console, each with its host in front: rank 0's on stdout, each
  // agent's own (-v: its config, its workers' starts) on stderr.
  EXPECT_NE(outcome.out.find(lab->address(0) + ": plain_sgd: rank 0 of 6,"), std::string::npos) << outcome.out;
  for (int node = 0; node < kHosts; ++node) {
    EXPECT_NE(outcome.err.find("\n" + lab->address(node) + ": ddprun: "), std::string::npos)
        << lab->address(node) << "\n" << outcome.err;
  }
  std::string left;
  EXPECT_TRUE(nothing_left(*fleet, 10s, left)) << left;
}

TEST(HostfileOverSsh, HostsThatAreDownAreNamedBeforeAnythingStarts) {
  MAKE_SSH_LAB(lab, fleet, keys);
  fleet->stop(2);  // sshd gone: connection refused
  TempDir dir;
  // An address of the lab's subnet that no node has: the connection times out.
  std::string nobody = lab->address(0).substr(0, lab->address(0).rfind('.')) + ".200";
  std::string hostfile = write_hostfile(dir, *lab, {nobody + " slots=1"});
  Launch launch(Launch::Command{launcher_argv(*lab, *fleet, hostfile, {sleeper(dir)})}, kShortTimeouts);
  Outcome outcome = launch.wait(60s);
  EXPECT_EQ(outcome.exit_status, 3) << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: host " + lab->address(2) + ": unreachable: "), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: host " + nobody + ": unreachable"), std::string::npos) << outcome.err;
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(outcome.err.find("host " + lab->address(node) + ":"), std::string::npos) << outcome.err;  // usable: not named
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "started_0")) << "a worker started";
  std::string left;
  EXPECT_TRUE(nothing_left(*fleet, 5s, left)) << left;
}

TEST(HostfileOverSsh, CtrlCLeavesNoProcessOfTheJobAnywhere) {
  MAKE_SSH_LAB(lab, fleet, keys);
  TempDir dir;
  Launch launch(Launch::Command{launcher_argv(*lab, *fleet, write_hostfile(dir, *lab),
                                              {"--rdzv-conf=" + kConf, "--shutdown-timeout=5", sleeper(dir)})},
                kShortTimeouts);
  ASSERT_TRUE(files_appear(dir, all_started(6), 60s)) << launch.wait(1s).err;
  launch.send(SIGINT);
  Outcome outcome = launch.wait(60s);
  EXPECT_EQ(outcome.exit_status, 130) << outcome.out << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: SIGINT: stopping every node"), std::string::npos) << outcome.err;
  std::string left;
  EXPECT_TRUE(nothing_left(*fleet, 20s, left)) << left << outcome.err;
}

TEST(HostfileOverSsh, ACutLinkStopsThatHostsWorkersAndFailsTheJob) {
  MAKE_SSH_LAB(lab, fleet, keys);
  TempDir dir;
  // The rendezvous would notice the lost store only after minutes here: what stops the cut-off
  // host's workers within the bound below is its agent's session watch alone.
  const std::string slow = "keep_alive_interval=10,keep_alive_max_attempt=30,read_timeout=300,join_timeout=60";
  Launch launch(Launch::Command{launcher_argv(*lab, *fleet, write_hostfile(dir, *lab),
                                              {"--rdzv-conf=" + slow, "--shutdown-timeout=5", sleeper(dir)})},
                kShortTimeouts);
  ASSERT_TRUE(files_appear(dir, all_started(6), 60s)) << launch.wait(1s).err;
  ASSERT_FALSE(fleet->job_processes(2).empty());
  lab->cut(2);  // no reset, no FIN: only silence tells
  Outcome outcome = launch.wait(90s);
  EXPECT_EQ(outcome.exit_status, 1) << outcome.out << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: the job failed: node "), std::string::npos) << outcome.err;
  // The cut-off host's agent hears nothing from the launcher and stops its workers by itself.
  std::string left;
  EXPECT_TRUE(nothing_left(*fleet, 30s, left)) << left << outcome.err;
  lab->restore(2);
}

// The launcher's store token reaches every host's agent and worker on the go line, never on a
// command line: the static job's store (node 0's agent) takes only agents that have it.
TEST(HostfileOverSsh, TheStoreTokenReachesEveryHostOffTheCommandLine) {
  MAKE_SSH_LAB(lab, fleet, keys);
  TempDir dir;
  const std::string secret = "fleet-secret-" + std::to_string(::getpid());
  const std::string worker = write_script(dir, "token_worker",
                                          "printf '%s' \"${DDPRUN_STORE_TOKEN:-none}\" > \"" + dir.str() +
                                              "/token_$RANK\"\nexec sleep 600\n");
  auto env = kShortTimeouts;
  env["DDPRUN_STORE_TOKEN"] = secret;
  Launch launch(Launch::Command{launcher_argv(*lab, *fleet, write_hostfile(dir, *lab),
                                              {"--rdzv-conf=" + kConf, "--shutdown-timeout=5", worker})},
                env);
  std::vector<std::string> tokens;
  for (int rank = 0; rank < 6; ++rank) tokens.push_back("token_" + std::to_string(rank));
  ASSERT_TRUE(files_appear(dir, tokens, 60s)) << launch.wait(1s).err;
  EXPECT_EQ(processes_with_argument(secret), std::vector<pid_t>{}) << "the token is on a command line";
  for (const auto& token : tokens) EXPECT_EQ(read_file(dir.path() / token), secret) << token;
  launch.send(SIGINT);
  Outcome outcome = launch.wait(60s);
  EXPECT_EQ(outcome.exit_status, 130) << outcome.err;
  std::string left;
  EXPECT_TRUE(nothing_left(*fleet, 20s, left)) << left;
}

// An elastic job (c10d, --nnodes 2:3) loses a host that does not host the store: the others'
// round drops it and the job goes on, and ends well; the cut-off host's agent stops its own workers.
TEST(HostfileOverSsh, AnElasticJobGoesOnWithoutACutOffHost) {
  MAKE_SSH_LAB(lab, fleet, keys);
  TempDir dir;
  const std::string d = "\"" + dir.str() + "\"";
  const std::string worker = write_script(dir, "go_worker",
                                          "echo \"$RANK $WORLD_SIZE\" >> " + d + "/starts\n"
                                          "i=0; while [ ! -e " + d + "/go ] && [ $i -lt 3600 ]; do sleep 0.05; i=$((i+1)); done\n");
  auto worlds_of = [&](int world) {
    std::ifstream in(dir.path() / "starts");
    int rank = 0, size = 0, count = 0;
    while (in >> rank >> size) count += size == world ? 1 : 0;
    return count;
  };
  Launch launch(Launch::Command{launcher_argv(*lab, *fleet, write_hostfile(dir, *lab),
                                              {"--nnodes=2:3", "--rdzv-backend=c10d", "--rdzv-conf=" + kConf,
                                               "--shutdown-timeout=5", worker})},
                kShortTimeouts);
  ASSERT_TRUE(eventually([&] { return worlds_of(6) == 6; }, 60s)) << launch.wait(1s).err;
  lab->cut(2);
  const bool reformed = eventually([&] { return worlds_of(4) == 4; }, 60s);
  std::ofstream(dir.path() / "go");
  Outcome outcome = launch.wait(90s);
  lab->restore(2);
  EXPECT_TRUE(reformed) << "no round of 2 nodes x 2 workers started\n" << outcome.err;
  EXPECT_EQ(outcome.exit_status, 0) << outcome.out << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: node 2 (" + lab->address(2) + "): its ssh connection failed or was lost (ssh exit "
                             "255); the job goes on with the other 2 nodes (--nnodes=2:3)"),
            std::string::npos)
      << outcome.err;
  std::string left;
  EXPECT_TRUE(nothing_left(*fleet, 30s, left)) << left << outcome.err;
}

}  // namespace

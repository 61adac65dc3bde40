// The options torchrun 2.x added, with real workers: --duplicate-stdout-filters and
// --duplicate-stderr-filters (the attempt's filtered_stdout.log / filtered_stderr.log),
// --virtual-local-rank (each worker's environment), --numa-binding (each worker's CPU affinity,
// read back from /proc/PID/status), and the Python plugins' options that only say why they do nothing.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "harness.hpp"

using namespace ddprun::testing;

namespace {

std::vector<std::string> sorted_lines(const std::string& text) {
  auto lines = split_lines(text);
  std::sort(lines.begin(), lines.end());
  return lines;
}

/// A worker that writes two stdout lines and one stderr line, naming its rank.
std::vector<std::string> chatty_worker() {
  return {"--no-python", "/bin/sh", "-c", "echo loss=$RANK; echo step $RANK; echo Error in $RANK >&2"};
}

std::vector<std::string> with(std::vector<std::string> flags, const std::vector<std::string>& program) {
  flags.insert(flags.end(), program.begin(), program.end());
  return flags;
}

}  // namespace

TEST(DuplicateFilters, MatchingTeedLinesOfEveryRankGoToTheAttemptsFilteredFiles) {
  TempDir logs;
  Outcome outcome = run_ddprun(with({"--standalone", "--nproc-per-node", "2", "--tee", "3", "--log-dir", logs.str(),
                                     "--duplicate-stdout-filters", "loss,nothing", "--duplicate_stderr_filters", "Error"},
                                    chatty_worker()),
                               {{"NO_COLOR", "1"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  auto attempt = only_run_folder(logs) / "attempt_0";
  EXPECT_EQ(sorted_lines(read_file(attempt / "filtered_stdout.log")),
            (std::vector<std::string>{"[default0]:loss=0", "[default1]:loss=1"}));
  EXPECT_EQ(sorted_lines(read_file(attempt / "filtered_stderr.log")),
            (std::vector<std::string>{"[default0]:Error in 0", "[default1]:Error in 1"}));
  // The log files and the console keep every line.
  EXPECT_EQ(read_file(attempt / "1" / "stdout.log"), "loss=1\nstep 1\n");
  EXPECT_NE(outcome.out.find("[default1]:step 1\n"), std::string::npos) << outcome.out;
}

TEST(DuplicateFilters, OnlyStreamsTeedToTheConsoleAreCopied) {
  TempDir logs;
  // Rank 0 tees stdout only, rank 1 nothing, and rank 2 is hidden from the console by the filter.
  Outcome outcome = run_ddprun(with({"--standalone", "--nproc-per-node", "3", "--tee", "0:1,2:3", "--local-ranks-filter",
                                     "0,1", "--log-dir", logs.str(), "--duplicate-stdout-filters", "loss",
                                     "--duplicate-stderr-filters", "Error"},
                                    chatty_worker()),
                               {{"NO_COLOR", "1"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  auto attempt = only_run_folder(logs) / "attempt_0";
  EXPECT_EQ(read_file(attempt / "filtered_stdout.log"), "[default0]:loss=0\n");
  EXPECT_EQ(read_file(attempt / "filtered_stderr.log"), "");  // made, as torchrun makes it, and empty
}

TEST(DuplicateFilters, WithoutFiltersThereIsNoFile) {
  TempDir logs;
  Outcome outcome = run_ddprun(with({"--standalone", "--tee", "3", "--log-dir", logs.str()}, chatty_worker()));
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  auto attempt = only_run_folder(logs) / "attempt_0";
  EXPECT_FALSE(std::filesystem::exists(attempt / "filtered_stdout.log"));
  EXPECT_FALSE(std::filesystem::exists(attempt / "filtered_stderr.log"));
}

TEST(VirtualLocalRank, EachWorkerSeesLocalRankZeroAndItsOwnGpu) {
  TempDir out;
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--virtual-local-rank", test_worker_binary(), "env",
                                out.str()},
                               {{"CUDA_VISIBLE_DEVICES", "5,7"}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  for (int rank : {0, 1}) {
    auto env = parse_env_file(out.path() / ("env_" + std::to_string(rank)));
    EXPECT_EQ(env["LOCAL_RANK"], "0") << rank;
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], rank == 0 ? "5" : "7");
  }
}

namespace {

/// The CPUs this process may use, in order.
std::vector<int> own_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

/// A machine of two NUMA nodes, one CPU each (`a` and `b`, CPUs this machine has), and one GPU on
/// each, written as sysfs lays it out.
void fake_two_node_machine(const std::filesystem::path& root, int a, int b) {
  write(root / "sys/devices/system/node/node0/cpulist", std::to_string(a));
  write(root / "sys/devices/system/node/node1/cpulist", std::to_string(b));
  int node = 0;
  for (const char* bus : {"0000:3b:00.0", "0000:86:00.0"}) {
    write(root / "proc/driver/nvidia/gpus" / bus / "information", std::string("GPU UUID: \t GPU-") + bus + "\n");
    write(root / "sys/bus/pci/devices" / bus / "numa_node", std::to_string(node++));
  }
}

/// "Cpus_allowed_list:\t3" lines of the console, by their "[defaultN]:" prefix.
std::map<std::string, std::string> allowed_lists(const std::string& console) {
  std::map<std::string, std::string> lists;
  for (const auto& line : split_lines(console)) {
    auto at = line.find("Cpus_allowed_list:");
    if (at == std::string::npos) continue;
    std::string value = line.substr(at + 18);
    value.erase(0, value.find_first_not_of(" \t"));
    lists[line.substr(0, at)] = value;
  }
  return lists;
}

/// A worker that prints its own affinity, as the kernel reports it.
const std::vector<std::string> kAffinityWorker = {"--no-python", "/bin/grep", "Cpus_allowed_list", "/proc/self/status"};

}  // namespace

TEST(NumaBinding, EachWorkerRunsOnTheCpusOfItsGpusNode) {
  // The topology is a fake one (DDPRUN_TEST_DEVICE_ROOT), the binding real: this machine's kernel
  // binds the workers, and /proc says where they may run.
  auto cpus = own_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "ddprun may use " << cpus.size() << " CPU here; the test needs two";
  TempDir root;
  fake_two_node_machine(root.path(), cpus[0], cpus[1]);
  Outcome outcome = run_ddprun(with({"--standalone", "--nproc-per-node", "2", "--tee", "1", "--numa-binding", "node"},
                                    kAffinityWorker),
                               {{"NO_COLOR", "1"}, {"DDPRUN_TEST_DEVICE_ROOT", root.str()}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  auto lists = allowed_lists(outcome.out);
  EXPECT_EQ(lists["[default0]:"], std::to_string(cpus[0])) << outcome.out;
  EXPECT_EQ(lists["[default1]:"], std::to_string(cpus[1])) << outcome.out;
  EXPECT_EQ(outcome.err.find("numa-binding"), std::string::npos) << outcome.err;
}

TEST(NumaBinding, AWorkerLeftUnboundRunsAnywhereAndTheLineSaysWhy) {
  auto cpus = own_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "ddprun may use " << cpus.size() << " CPU here; the test needs two";
  TempDir root;
  fake_two_node_machine(root.path(), cpus[0], cpus[1]);
  write(root.path() / "sys/bus/pci/devices/0000:86:00.0/numa_node", "-1");
  Outcome outcome = run_ddprun(with({"--standalone", "--nproc-per-node", "2", "--tee", "1", "--numa-binding", "exclusive"},
                                    kAffinityWorker),
                               {{"NO_COLOR", "1"}, {"DDPRUN_TEST_DEVICE_ROOT", root.str()}});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  auto lists = allowed_lists(outcome.out);
  EXPECT_EQ(lists["[default0]:"], std::to_string(cpus[0])) << outcome.out;
  EXPECT_NE(lists["[default1]:"], std::to_string(cpus[1])) << outcome.out;  // every CPU ddprun has
  EXPECT_NE(outcome.err.find("ddprun: note: --numa-binding=exclusive: local rank 1 not bound: its GPU 0000:86:00.0 has no "
                             "NUMA node in sysfs (numa_node -1) on a machine of 2 NUMA nodes\n"),
            std::string::npos)
      << outcome.err;
}

TEST(NumaBinding, OnThisMachinesOwnSysfs) {
  if (std::filesystem::exists("/proc/driver/nvidia/gpus") && !std::filesystem::is_empty("/proc/driver/nvidia/gpus")) {
    // A GPU machine: each worker's CPUs are those of its GPU's node that ddprun may use.
    Outcome outcome = run_ddprun(with({"--standalone", "--tee", "1", "--numa-binding", "node"}, kAffinityWorker),
                                 {{"NO_COLOR", "1"}});
    ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
    std::vector<std::filesystem::path> gpus(std::filesystem::directory_iterator("/proc/driver/nvidia/gpus"), {});
    std::sort(gpus.begin(), gpus.end());
    std::string node = read_file("/sys/bus/pci/devices" / gpus.front().filename() / "numa_node");
    node.erase(node.find_last_not_of(" \n") + 1);
    if (node == "-1") node = "0";
    std::string expected = read_file("/sys/devices/system/node/node" + node + "/cpulist");
    expected.erase(expected.find_last_not_of(" \n") + 1);
    if (own_cpus().size() != static_cast<std::size_t>(::sysconf(_SC_NPROCESSORS_CONF))) {
      GTEST_SKIP() << "ddprun's own affinity is limited here; node " << node << "'s CPUs are " << expected;
    }
    EXPECT_EQ(allowed_lists(outcome.out)["[default0]:"], expected) << outcome.out;
    return;
  }
  // No GPU: the job runs as without the flag, and one line says why the flag did nothing.
  Outcome outcome = run_ddprun(with({"--standalone", "--numa-binding", "node"}, kAffinityWorker));
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_NE(outcome.err.find("ddprun: note: --numa-binding=node: no effect: no NVIDIA GPU found"), std::string::npos)
      << outcome.err;
  EXPECT_EQ(split_lines(outcome.err).size(), 1U) << outcome.err;
  GTEST_SKIP() << "this machine has no NVIDIA GPU: the binding itself was tested on a fake topology";
}

TEST(TorchrunPlugins, ANonDefaultValueSaysInOneLineWhyItDoesNothing) {
  Outcome outcome = run_ddprun({"--standalone", "--event-log-handler", "console", "--logs-specs", "default",
                                test_worker_binary(), "echo", "ran"});
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(outcome.out, "ran\n");
  EXPECT_EQ(outcome.err, "ddprun: note: --event-log-handler=console: no effect under ddprun (it names a handler of "
                         "torchrun's Python event log); ddprun writes the job's events with --events FILE\n");
}

// A launcher that sees the GPUs (issue 27), end to end: the real ddprun binary with the stand-in NVML
// (tests/support/nvml_standin.c, selected by DDPRUN_NVML_LIBRARY and driven through the control file
// named by DDPRUN_NVML_STANDIN, which the tests rewrite while ddprun runs) and shell workers.
// - Health: an unhealthy GPU that a worker sees refuses the start with one line naming it, before
//   every attempt (a GPU lost during the first attempt refuses the restart); one out of sight, a
//   GeForce without ECC, --gpu-health off and a machine without NVML let the job run. Elastic: the
//   node with the bad GPU leaves, the other runs the job alone.
// - Release: a restart waits for the stopped workers' GPU memory (only theirs), at most
//   --gpu-release-timeout, saying so.
// - A stalled NVML call delays neither the reaction to a worker's exit nor ddprun's own exit.
// - The GPU fields in /api/status, /metrics (promtool), `ddprun status` and the terminal's status block.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "../support/chromium.hpp"  // shell_output
#include "../support/free_port.hpp"
#include "../support/raw_http.hpp"
#include "harness.hpp"
#include "pty_launch.hpp"

namespace ddprun::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kStandin = NVML_STANDIN_LIBRARY;

/// Two GPUs with identities of their own, so that a line that names them shows they came from NVML.
/// GPU 0's bus sorts first: CUDA index 0 (PCI order) is NVML's GPU 0.
const std::string kUuid0 = "GPU-0a11ce00-1111-2222-3333-444455556666";
const std::string kUuid1 = "GPU-0b0b0b01-7777-8888-9999-aaaabbbbcccc";
const std::string kBus0 = "00000000:1B:00.0";
const std::string kBus1 = "00000000:3B:00.0";
const std::string kTwoGpus = "gpu 0 uuid=" + kUuid0 + " bus=" + kBus0 + " mem_total=85899345920 util=40\n" +
                             "gpu 1 uuid=" + kUuid1 + " bus=" + kBus1 + " mem_total=85899345920 util=40\n";

/// The stand-in's control file; each write replaces it whole (a new file renamed over it), since
/// the stand-in reads it again at every call and must never see half of one.
class ControlFile {
 public:
  explicit ControlFile(const TempDir& dir, const std::string& name = "nvml") : path_(dir.path() / name) {}
  void write(const std::string& text) const {
    const fs::path next = path_.string() + ".next";
    std::ofstream(next) << text;
    fs::rename(next, path_);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// ddprun's environment for the stand-in. OMP_NUM_THREADS set, so that ddprun's torchrun warning
/// about it is not among the lines the tests count.
std::map<std::string, std::string> nvml_env(const ControlFile& control) {
  return {{"DDPRUN_NVML_LIBRARY", kStandin}, {"DDPRUN_NVML_STANDIN", control.path().string()}, {"OMP_NUM_THREADS", "1"}};
}

/// A worker script (run as /bin/sh FILE ARGS: ddprun substitutes $$ and ${local_rank} in ARGS,
/// never in a file's text).
std::string script(const TempDir& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir.path() / name;
  std::ofstream(path) << text;
  return path.string();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int count_of(const std::string& text, const std::string& part) {
  int count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

/// The files in `dir` whose name starts with `prefix`.
int files_named(const TempDir& dir, const std::string& prefix) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) count += entry.path().filename().string().starts_with(prefix);
  return count;
}

/// A wall-clock time a worker wrote with `date +%s.%N`.
double time_in(const fs::path& file) { return std::stod(read_file(file)); }

// ---- 0. A GPU straggler, named ----

// Rank 1's GPU idles while rank 0's works: once the GPUs have been sampled 5 times in a row (every
// 2 s) it is named once, with the figures, and recorded; a job whose GPUs all idle names nobody.
TEST(GpuStraggler, ARankWhoseGpuIdlesWhileTheOthersWorkIsNamedOnce) {
  struct Case {
    const char* name;
    std::string control;
    int named;
  };
  const std::vector<Case> cases = {
      {"rank 1 idles", "gpu 0 mem_total=85899345920 util=95\ngpu 1 mem_total=85899345920 util=2\n", 1},
      {"every GPU idles (waiting on input)", "gpu 0 mem_total=85899345920 util=3\ngpu 1 mem_total=85899345920 util=0\n", 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    ControlFile control(dir);
    control.write(c.control);
    Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--devices-per-worker", "1",
                                  "--status-interval", "1", "--events", (dir.path() / "events.jsonl").string(),
                                  "--no-python", "/bin/sh", "-c", "sleep 13"},
                                 nvml_env(control));
    EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
    EXPECT_EQ(count_of(outcome.err, "is a GPU straggler"), c.named) << outcome.err;
    if (c.named == 0) continue;
    EXPECT_TRUE(contains(outcome.err, "ddprun: rank 1 is a GPU straggler: its GPU busy 2 % of the time, the median "
                                      "of this node's ranks is 48 %\n"))
        << outcome.err;
    EXPECT_FALSE(contains(outcome.err, "rank 0 is a GPU straggler")) << outcome.err;
    EXPECT_TRUE(contains(read_file(dir.path() / "events.jsonl"), "\"gpu_utilization_percent\":2"));
  }
}

// ---- 1. Health, one node ----

/// Marks that it ran (ran_<attempt>_<local rank>), and ends.
const char* kMarkAndEnd = "touch \"$1/ran_${TORCHELASTIC_RESTART_COUNT}_$LOCAL_RANK\"\n";

struct HealthCase {
  const char* name;
  std::string control;  ///< after kTwoGpus: what makes GPU 1 unhealthy (later gpu lines add keys)
  std::string line;     ///< the one line on stderr
};

TEST(GpuHealth, AnUnhealthyGpuInSightRefusesTheStartWithOneLineAndNoWorker) {
  const std::string refused = ": no worker started (--gpu-health off starts them anyway)\n";
  const std::string gpu1 = "GPU 1 (" + kUuid1 + ", bus " + kBus1 + ") ";
  const std::vector<HealthCase> cases = {
      // A GPU lost before ddprun first asked answers nothing, not even its UUID or bus id (NVML's
      // handle calls fail with GPU_IS_LOST): the line says so. A GPU lost later is named in full
      // (RestartIsRefusedWhenTheGpuIsLostDuringTheFirstAttempt).
      {"lost", "lost 1\n",
       "ddprun: GPU 1 (uuid unknown, bus unknown) has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST)" + refused},
      {"reset required", "error 1 nvmlDeviceGetUtilizationRates RESET_REQUIRED\n",
       "ddprun: " + gpu1 + "needs a reset (NVML: RESET_REQUIRED)" + refused},
      {"retired pages pending", "gpu 1 retired_pending=1\n",
       "ddprun: " + gpu1 + "has retired memory pages pending: they are retired at the next reset" + refused},
      {"uncorrectable ECC", "gpu 1 ecc_uncorrected=2\n",
       "ddprun: " + gpu1 + "has had 2 uncorrectable ECC errors since the driver loaded" + refused},
      {"row remapping pending", "gpu 1 remapped_pending=1\n",
       "ddprun: " + gpu1 + "has memory row remapping pending: the rows are remapped at the next reset" + refused},
  };
  for (const HealthCase& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    ControlFile control(dir);
    control.write(kTwoGpus + c.control);
    Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "2", "--max-restarts", "3", "--no-python",
                                  "/bin/sh", script(dir, "worker.sh", kMarkAndEnd), dir.str()},
                                 nvml_env(control));
    EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
    EXPECT_EQ(outcome.err, c.line);  // that line alone: no failure summary, no restart
    EXPECT_EQ(outcome.out, "");
    EXPECT_EQ(files_named(dir, "ran_"), 0) << "a worker started";
  }
}

struct RunsCase {
  const char* name;
  std::string control;
  std::vector<std::string> flags;
  std::map<std::string, std::string> env;
};

TEST(GpuHealth, AGpuOutOfSightAGeForceHealthOffAndNoNvmlLetTheJobRunSilently) {
  const std::vector<RunsCase> cases = {
      // The workers see GPU 0 alone (CUDA index 0 is the GPU on the lowest bus).
      {"lost GPU out of sight", kTwoGpus + "lost 1\n", {}, {{"CUDA_VISIBLE_DEVICES", "0"}}},
      {"bad ECC out of sight", kTwoGpus + "gpu 1 ecc_uncorrected=5\n", {}, {{"CUDA_VISIBLE_DEVICES", "0"}}},
      {"out of sight by UUID", kTwoGpus + "gpu 1 ecc_uncorrected=5\n", {}, {{"CUDA_VISIBLE_DEVICES", "GPU-0a11ce"}}},
      {"--gpu-health off", kTwoGpus + "lost 1\n", {"--gpu-health", "off"}, {}},
      // ECC off (a GeForce board): the ECC counters, retired pages and remapped rows are
      // NOT_SUPPORTED whatever the file's numbers say, and unknown is no reason to refuse.
      {"GeForce without ECC", kTwoGpus + "gpu 1 name=\"NVIDIA GeForce RTX 4090\" ecc=0 ecc_uncorrected=5 "
                                         "retired_pending=1 remapped_pending=1\n", {}, {}},
      {"NVML fails to initialise", kTwoGpus + "lost 1\ninit_error DRIVER_NOT_LOADED\n", {}, {}},
      {"no NVML library", kTwoGpus + "lost 1\n", {}, {{"DDPRUN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}}},
  };
  for (const RunsCase& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    ControlFile control(dir);
    control.write(c.control);
    std::vector<std::string> args = {"--standalone", "--nproc-per-node", "2"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    args.insert(args.end(), {"--no-python", "/bin/sh", script(dir, "worker.sh", kMarkAndEnd), dir.str()});
    auto env = nvml_env(control);
    for (const auto& [name, value] : c.env) env[name] = value;
    Outcome outcome = run_ddprun(args, env);
    EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
    EXPECT_EQ(outcome.err, "") << "nothing to say";
    EXPECT_EQ(files_named(dir, "ran_0_"), 2);
  }
}

// The check is made before every attempt, not once: GPU 1 falls off the bus while the first
// attempt runs, its worker fails, and the restart (3 allowed) is refused: one attempt ran, not 4.
TEST(GpuHealth, RestartIsRefusedWhenTheGpuIsLostDuringTheFirstAttempt) {
  TempDir dir;
  ControlFile control(dir);
  control.write(kTwoGpus);
  const std::string worker = script(dir, "worker.sh",
                                    "touch \"$1/ran_${TORCHELASTIC_RESTART_COUNT}_$LOCAL_RANK\"\n"
                                    "while [ ! -f \"$1/fail\" ]; do sleep 0.02; done\n"
                                    "exit 1\n");
  Launch launch({"--standalone", "--nproc-per-node", "2", "--max-restarts", "3", "--no-python", "/bin/sh", worker, dir.str()},
                nvml_env(control));
  ASSERT_TRUE(eventually([&] { return files_named(dir, "ran_0_") == 2; })) << "the first attempt did not start";
  control.write(kTwoGpus + "lost 1\n");
  std::ofstream(dir.path() / "fail");
  Outcome outcome = launch.wait();
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_EQ(files_named(dir, "ran_"), 2) << "only the first attempt's two workers ran";
  // Lost now, but its UUID and bus id were read before the first attempt.
  const std::string line = "ddprun: GPU 1 (" + kUuid1 + ", bus " + kBus1 +
                           ") has fallen off the bus or is inaccessible (NVML: GPU_IS_LOST): no worker started "
                           "(--gpu-health off starts them anyway)\n";
  EXPECT_EQ(count_of(outcome.err, line), 1) << outcome.err;
  EXPECT_EQ(count_of(outcome.err, "GPU 1 ("), 1) << outcome.err;
}

// ---- 2. Health, elastic ----

// Two agents of an elastic job (--nnodes 1:2, c10d), each with its own stand-in GPUs. Node B's GPU 1
// is lost: B says so and leaves the round with exit 1; A goes on alone, its workers in a round of
// world size 2, and the job succeeds there.
TEST(GpuHealth, ElasticTheNodeWithABadGpuLeavesAndTheOtherRunsTheJob) {
  TempDir dir;
  TempDir dir_a;
  TempDir dir_b;
  ControlFile control_a(dir, "nvml_a");
  ControlFile control_b(dir, "nvml_b");
  control_a.write(kTwoGpus);
  control_b.write(kTwoGpus + "lost 1\n");
  // Each worker notes its world size; one in a round of 2 (node A alone) ends when the test says,
  // after B has gone, so that A's job cannot end before B joined and left. Others wait to be stopped.
  const std::string worker = script(dir, "worker.sh",
                                    "echo \"$RANK $WORLD_SIZE\" >> \"$1/ranks\"\n"
                                    "if [ \"$WORLD_SIZE\" = 2 ]; then\n"
                                    "  while [ ! -f \"$2/end\" ]; do sleep 0.02; done\n"
                                    "  exit 0\n"
                                    "fi\n"
                                    "exec sleep 60\n");
  const int port = free_port();
  auto agent = [&](const ControlFile& control, const TempDir& own, bool host) {
    return std::make_unique<Launch>(
        std::vector<std::string>{"--nnodes", "1:2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                                 "--rdzv-endpoint", "127.0.0.1:" + std::to_string(port), "--rdzv-id", "gpu-elastic",
                                 // A hosts the store: B, which leaves, must not take it along.
                                 std::string("--rdzv-conf=last_call_timeout=0.3,join_timeout=20,close_timeout=5,is_host=") +
                                     (host ? "1" : "0"),
                                 "--no-python", "/bin/sh", worker, own.str(), dir.str()},
        nvml_env(control));
  };
  auto a = agent(control_a, dir_a, true);
  auto b = agent(control_b, dir_b, false);
  Outcome left = b->wait(15s);
  std::ofstream(dir.path() / "end");
  Outcome stayed = a->wait(15s);

  const std::string line = "GPU 1 (uuid unknown, bus unknown) has fallen off the bus or is inaccessible (NVML: "
                           "GPU_IS_LOST): no worker started (--gpu-health off starts them anyway)";
  EXPECT_EQ(left.exit_status, 1) << left.err;
  // B says why it goes; that it left is said by the others (B may also read its own leaving back
  // from the store before it exits: "node HOST (ADDRESS) left: GPU 1 ...").
  EXPECT_EQ(count_of(left.err, "ddprun: " + line + "\n"), 1) << left.err;
  EXPECT_FALSE(fs::exists(dir_b.path() / "ranks")) << "a worker started on node B:\n" << read_file(dir_b.path() / "ranks");

  EXPECT_EQ(stayed.exit_status, 0) << stayed.err;
  EXPECT_TRUE(contains(stayed.err, ") left: " + line)) << stayed.err;  // "node HOST (ADDRESS) left: ..."
  EXPECT_TRUE(contains(stayed.err, "1 node(s), world size 2")) << stayed.err;
  // A's last round: ranks 0 and 1 of a world of 2.
  std::vector<std::string> ranks = split_lines(read_file(dir_a.path() / "ranks"));
  ASSERT_GE(ranks.size(), 2u) << stayed.err;
  std::vector<std::string> last(ranks.end() - 2, ranks.end());
  std::sort(last.begin(), last.end());
  EXPECT_EQ(last, (std::vector<std::string>{"0 2", "1 2"})) << read_file(dir_a.path() / "ranks");
}

// ---- 3. The wait for the stopped workers' GPU memory ----

/// Attempt 0: the worker puts itself (or the pid in $3) on GPU 0's process list, as a CUDA context
/// would, notes its pid and the time, and fails. Attempt 1 notes the time it started and succeeds.
const char* kHoldAndFail =
    "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then\n"
    "  { cat \"$2\"; echo \"proc 0 pid=${3:-$$} used=1500000000\"; } > \"$2.worker\" && mv \"$2.worker\" \"$2\"\n"
    "  echo $$ > \"$1/pid\"\n"
    "  date +%s.%N > \"$1/failed_at\"\n"
    "  exit 3\n"
    "fi\n"
    "date +%s.%N > \"$1/restarted_at\"\n";

struct ReleaseJob {
  TempDir dir;
  ControlFile control{dir};
  std::unique_ptr<Launch> launch;

  /// `holder`: the pid the worker lists on the GPU; empty: its own.
  explicit ReleaseJob(const std::vector<std::string>& flags, const std::string& holder = "") {
    control.write(kTwoGpus);
    std::vector<std::string> args = {"--standalone", "--max-restarts", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--no-python", "/bin/sh", script(dir, "worker.sh", kHoldAndFail), dir.str(),
                             control.path().string()});
    if (!holder.empty()) args.push_back(holder);
    launch = std::make_unique<Launch>(args, nvml_env(control));
  }
  bool failed() { return eventually([&] { return fs::exists(dir.path() / "failed_at"); }); }
  double restart_delay() const { return time_in(dir.path() / "restarted_at") - time_in(dir.path() / "failed_at"); }
  std::string pid() const { return split_lines(read_file(dir.path() / "pid")).at(0); }
};

// The memory is freed 2 s after the failure (the test takes the worker's line out; the worker's own
// processes are gone by then): the restart waits for it, saying so, and no longer.
TEST(GpuRelease, TheRestartWaitsUntilTheStoppedWorkersMemoryIsFreed) {
  ReleaseJob job({});
  ASSERT_TRUE(job.failed());
  std::this_thread::sleep_for(2s);
  job.control.write(kTwoGpus);
  Outcome outcome = job.launch->wait();
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_GE(job.restart_delay(), 1.9) << outcome.err;
  EXPECT_LT(job.restart_delay(), 4.0) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: waiting for the stopped workers' GPU memory to be freed: 1.4G by pid " +
                                        job.pid() + " (at most 30 s, --gpu-release-timeout)\n"))
      << outcome.err;
  std::smatch freed;
  ASSERT_TRUE(std::regex_search(outcome.err, freed, std::regex("ddprun: GPU memory of the stopped workers freed after ([0-9.]+) s\n")))
      << outcome.err;
  EXPECT_GE(std::stod(freed[1]), 1.9) << outcome.err;
}

// Memory held by a process that is not the job's (here: the test's own pid) is not waited for.
// The timeout is 3 s so that a wrong wait shows as a delay of 3 s, not as a 30 s test.
TEST(GpuRelease, MemoryOfAnotherProcessIsNotWaitedFor) {
  ReleaseJob job({"--gpu-release-timeout", "3"}, std::to_string(::getpid()));
  Outcome outcome = job.launch->wait();
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_LT(job.restart_delay(), 1.5) << outcome.err;
  EXPECT_FALSE(contains(outcome.err, "GPU memory")) << outcome.err;
}

// Held for good: the restart goes ahead after --gpu-release-timeout, naming the pid.
TEST(GpuRelease, MemoryHeldPastTheTimeoutIsNamedAndTheWorkersStartAnyway) {
  ReleaseJob job({"--gpu-release-timeout", "1"});
  Outcome outcome = job.launch->wait();
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_GE(job.restart_delay(), 0.95) << outcome.err;
  EXPECT_LT(job.restart_delay(), 2.5) << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: waiting for the stopped workers' GPU memory to be freed: 1.4G by pid " +
                                        job.pid() + " (at most 1 s, --gpu-release-timeout)\n"))
      << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "ddprun: GPU memory still held after 1 s (--gpu-release-timeout): 1.4G by pid " +
                                        job.pid() + "; starting the workers anyway\n"))
      << outcome.err;
}

TEST(GpuRelease, TimeoutZeroDoesNotWait) {
  ReleaseJob job({"--gpu-release-timeout", "0"});
  Outcome outcome = job.launch->wait();
  ASSERT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_LT(job.restart_delay(), 1.5) << outcome.err;
  EXPECT_FALSE(contains(outcome.err, "GPU memory")) << outcome.err;
}

// ---- 4. A stalled NVML ----

// While the status monitor samples (--status-interval 0.2), utilisation reads stall for good. The
// worker lives on until ddprun has said so (the sampler's deadline is 2 s after the stuck call
// began) and 1.5 s more (more samples of the same stall), notes the time and fails: ddprun exits
// right after, though its NVML thread never comes back from the call.
TEST(GpuStall, AStalledNvmlCallDelaysNeitherTheReactionToAnExitNorDdprunsExit) {
  TempDir dir;
  ControlFile control(dir);
  control.write(kTwoGpus);
  const std::string worker = script(dir, "worker.sh",
                                    "touch \"$1/started\"\n"
                                    "while [ ! -f \"$1/stalled\" ]; do sleep 0.02; done\n"
                                    "i=0\n"  // 10 s at most: a ddprun that never says it fails below
                                    "while ! grep -q 'NVML stalled' \"$1/ddprun.err\" && [ $i -lt 500 ]; do\n"
                                    "  sleep 0.02; i=$((i + 1))\n"
                                    "done\n"
                                    "sleep 1.5\n"
                                    "date +%s.%N > \"$1/exit_at\"\n"
                                    "exit 1\n");
  // The shell notes when ddprun exited, and holds the test's pipes alone (ddprun writes to files),
  // so that a ddprun that never exits fails the test at the timeout instead of hanging it.
  const fs::path err = dir.path() / "ddprun.err";
  Launch launch(Launch::Command{{"/bin/sh", "-c",
                                 "\"$0\" \"$@\" >\"$TEST_DIR/ddprun.out\" 2>\"$TEST_DIR/ddprun.err\" & "
                                 "echo $! >\"$TEST_DIR/ddprun.pid\"; wait $!; status=$?; "
                                 "date +%s.%N >\"$TEST_DIR/ddprun_end\"; exit $status",
                                 ddprun_binary(), "--standalone", "--status-interval", "0.2", "--no-python", "/bin/sh",
                                 worker, dir.str()}},
                [&] {
                  auto env = nvml_env(control);
                  env["TEST_DIR"] = dir.str();
                  return env;
                }());
  struct KillLeftover {  // a ddprun that hangs (the failure this test looks for) goes with the test
    fs::path pid_file;
    ~KillLeftover() {
      const std::string pid = read_file(pid_file);
      if (!pid.empty() && process_alive(std::stoi(pid))) ::kill(std::stoi(pid), SIGKILL);
    }
  } leftover{dir.path() / "ddprun.pid"};
  // After the first attempt started: a stall before NVML's first answer would hold the start for
  // the gate's first deadline (30 s).
  ASSERT_TRUE(eventually([&] { return fs::exists(dir.path() / "started"); }));
  std::this_thread::sleep_for(300ms);  // a sample or so with answers
  control.write(kTwoGpus + "sleep nvmlDeviceGetUtilizationRates forever\n");
  std::ofstream(dir.path() / "stalled");
  Outcome outcome = launch.wait(20s);
  outcome.err = read_file(err);
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  ASSERT_TRUE(fs::exists(dir.path() / "ddprun_end")) << "ddprun did not exit\n" << outcome.err;
  const double reaction = time_in(dir.path() / "ddprun_end") - time_in(dir.path() / "exit_at");
  EXPECT_LT(reaction, 1.0) << outcome.err;
  // The stall is said when it begins, once, however long it lasts: the note's seconds grow at every
  // sample (0.2 s apart here), and the status lines go on.
  EXPECT_EQ(count_of(outcome.err, "ddprun: GPU state: NVML stalled: nvmlDeviceGetUtilizationRates has not returned for "),
            1)
      << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "; the GPU fields keep their last values\n")) << outcome.err;
}

// The check before a restart with NVML stalled: skipped after its 2 s deadline with one line, the
// restart goes on (not 30 s later, nor never), and ddprun exits though the NVML call never returns.
TEST(GpuStall, TheCheckBeforeARestartIsSkippedWithALineWhenNvmlStalls) {
  TempDir dir;
  ControlFile control(dir);
  control.write(kTwoGpus);
  // Attempt 0 (which started after NVML's first answer) stalls NVML for good, notes when, and fails.
  const std::string stall = "printf '%s' \"$(cat \"$2\")\nsleep nvmlDeviceGetUtilizationRates forever\n\" > \"$2.next\" && mv \"$2.next\" \"$2\"";
  const std::string worker = script(dir, "worker.sh",
                                    "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then\n"
                                    "  " + stall + "\n"
                                    "  date +%s.%N > \"$1/failed_at\"\n"
                                    "  exit 3\n"
                                    "fi\n"
                                    "date +%s.%N > \"$1/restarted_at\"\n");
  Outcome outcome = run_ddprun({"--standalone", "--nproc-per-node", "1", "--max-restarts", "1", "--no-python",
                                "/bin/sh", worker, dir.str(), control.path().string()},
                               nvml_env(control));
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  EXPECT_EQ(count_of(outcome.err, "ddprun: GPU check skipped: NVML stalled: nvmlDeviceGetUtilizationRates has not "
                                  "returned for "),
            1)
      << outcome.err;
  EXPECT_TRUE(contains(outcome.err, "; the workers start without it\n")) << outcome.err;
  ASSERT_TRUE(fs::exists(dir.path() / "restarted_at")) << outcome.err;
  const double waited = time_in(dir.path() / "restarted_at") - time_in(dir.path() / "failed_at");
  EXPECT_GT(waited, 1.5) << "the deadline is 2 s";
  EXPECT_LT(waited, 6.0) << "not the 30 s of NVML's first answer";
}

// ---- 5. The GPU fields in the status outputs ----

/// GPU 0: busy, hot, power-capped; GPU 1: less so (not a GPU straggler: above half the median).
const std::string kBusyGpus =
    "gpu 0 uuid=" + kUuid0 + " bus=" + kBus0 +
    " util=97 mem_used=65498251264 mem_total=85899345920 temp=71 power_mw=312500 throttle=0x4\n" +
    "gpu 1 uuid=" + kUuid1 + " bus=" + kBus1 + " util=60 mem_used=10737418240 mem_total=85899345920 temp=55 power_mw=150000\n";

/// Notes its pid and waits for the test's word.
const char* kPidAndWait =
    "echo $$ > \"$1/pid_$LOCAL_RANK\"\n"
    "while [ ! -f \"$1/end\" ]; do sleep 0.05; done\n";

/// A job of 2 workers, one GPU each (--devices-per-worker 1: CUDA_VISIBLE_DEVICES 0 and 1), with the
/// status endpoint; its stderr goes to a file read while it runs.
class GpuStatusJob {
 public:
  explicit GpuStatusJob(const RuntimeDir& runtime) : control_(dir_) {
    control_.write(kBusyGpus);
    auto env = nvml_env(control_);
    env["XDG_RUNTIME_DIR"] = runtime.str();
    env["TEST_ERR"] = err_.string();
    launch_ = std::make_unique<Launch>(
        Launch::Command{{"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>\"$TEST_ERR\"", ddprun_binary(), "--standalone",
                         "--nproc-per-node", "2", "--devices-per-worker", "1", "--status-port", "0", "--no-python",
                         "/bin/sh", script(dir_, "worker.sh", kPidAndWait), dir_.str()}},
        env);
  }
  ~GpuStatusJob() {
    if (launch_) end();
  }
  /// The workers' pids by rank, once both started; empty if they did not.
  std::vector<std::string> pids() const {
    if (!eventually([&] { return !read_file(dir_.path() / "pid_0").empty() && !read_file(dir_.path() / "pid_1").empty(); })) {
      return {};
    }
    return {split_lines(read_file(dir_.path() / "pid_0")).at(0), split_lines(read_file(dir_.path() / "pid_1")).at(0)};
  }
  const ControlFile& control() const { return control_; }
  std::string stderr_text() const { return read_file(err_); }
  int port() const { return printed_status_port(stderr_text()); }
  Outcome end() {
    std::ofstream(dir_.path() / "end");
    Outcome outcome = launch_->wait();
    launch_.reset();
    outcome.err = stderr_text();
    return outcome;
  }

 private:
  TempDir dir_;
  ControlFile control_;
  fs::path err_ = dir_.path() / "ddprun.err";
  std::unique_ptr<Launch> launch_;
};

/// rank -> its status, as /api/status serves it; empty on any error.
std::map<int, nlohmann::json> served_ranks(int port, std::string& body) {
  std::map<int, nlohmann::json> ranks;
  HttpReply reply = http_get(RawConnection::tcp(port), "/api/status");
  body = reply.body;
  if (reply.status != 200) return {};
  const nlohmann::json status = nlohmann::json::parse(reply.body, nullptr, false);
  if (status.is_discarded()) return {};
  for (const auto& node : status.at("nodes")) {
    for (const auto& rank : node.at("ranks")) ranks[rank.at("rank").get<int>()] = rank;
  }
  return ranks;
}

// Each rank sees its own GPU: /api/status gives its values (the memory its own process holds on
// it, by NVML's process list; an Xid that came after ddprun began watching), /metrics gives them
// as ddprun_rank_gpu_* series that promtool accepts, and `ddprun status` has the gpu column.
TEST(GpuStatus, ApiStatusMetricsAndDdprunStatusShowEachRanksGpu) {
  RuntimeDir runtime;
  GpuStatusJob job(runtime);
  const std::vector<std::string> pids = job.pids();
  ASSERT_EQ(pids.size(), 2u) << job.stderr_text();
  ASSERT_TRUE(eventually([&] { return job.port() > 0; })) << job.stderr_text();
  // Rank 1's process holds 4 GiB of its GPU; GPU 0 reports Xid 79 (the gate's sample before the
  // start registered ddprun for Xids: one from before would not be reported, as in NVML).
  job.control().write(kBusyGpus + "proc 1 pid=" + pids[1] + " used=4294967296\nxid 0 79\n");

  std::map<int, nlohmann::json> ranks;
  std::string body;
  ASSERT_TRUE(eventually([&] {
    ranks = served_ranks(job.port(), body);
    return ranks.size() == 2 && ranks[0]["gpus"].size() == 1 && ranks[0]["gpus"][0]["xid_count"] == 1 &&
           ranks[1]["gpus"].size() == 1 && ranks[1]["gpus"][0]["own_memory_bytes"] == 4294967296ULL;
  }, 10s)) << body;
  const nlohmann::json gpu0 = ranks[0]["gpus"][0];
  EXPECT_EQ(gpu0["index"], 0) << gpu0;
  EXPECT_EQ(gpu0["uuid"], kUuid0) << gpu0;
  EXPECT_EQ(gpu0["bus_id"], kBus0) << gpu0;
  EXPECT_EQ(gpu0["utilisation_percent"], 97) << gpu0;
  EXPECT_EQ(gpu0["memory_used_bytes"], 65498251264ULL) << gpu0;
  EXPECT_EQ(gpu0["memory_total_bytes"], 85899345920ULL) << gpu0;
  EXPECT_EQ(gpu0["own_memory_bytes"], 0) << "its process is not on the GPU's list: " << gpu0;
  EXPECT_EQ(gpu0["temperature_c"], 71) << gpu0;
  EXPECT_DOUBLE_EQ(gpu0["power_watts"].get<double>(), 312.5) << gpu0;
  EXPECT_EQ(gpu0["throttle"], nlohmann::json::array({"SwPowerCap"})) << gpu0;
  EXPECT_EQ(gpu0["uncorrectable_ecc_errors"], 0) << gpu0;
  EXPECT_EQ(gpu0["xids"], nlohmann::json::array({79})) << gpu0;
  EXPECT_EQ(gpu0["problem"], "") << gpu0;
  const nlohmann::json gpu1 = ranks[1]["gpus"][0];
  EXPECT_EQ(gpu1["index"], 1) << gpu1;
  EXPECT_EQ(gpu1["uuid"], kUuid1) << gpu1;
  EXPECT_EQ(gpu1["utilisation_percent"], 60) << gpu1;
  EXPECT_EQ(gpu1["temperature_c"], 55) << gpu1;
  EXPECT_DOUBLE_EQ(gpu1["power_watts"].get<double>(), 150.0) << gpu1;
  EXPECT_EQ(gpu1["throttle"], nlohmann::json::array()) << gpu1;
  EXPECT_EQ(gpu1["xid_count"], 0) << gpu1;
  EXPECT_EQ(ranks[0]["gpu_straggler"], false);
  EXPECT_EQ(ranks[1]["gpu_straggler"], false);

  HttpReply metrics = http_get(RawConnection::tcp(job.port()), "/metrics");
  ASSERT_EQ(metrics.status, 200);
  // The series of rank R name its GPU (R: one GPU per rank) by index and UUID.
  struct Sample {
    std::string name;
    int rank;
    std::string value;
    std::string more_labels;
  };
  for (const Sample& sample : std::vector<Sample>{
           {"ddprun_rank_gpu_utilization_ratio", 0, "0.97", ""},
           {"ddprun_rank_gpu_utilization_ratio", 1, "0.6", ""},
           {"ddprun_rank_gpu_memory_used_bytes", 0, "65498251264", ""},
           {"ddprun_rank_gpu_memory_total_bytes", 1, "85899345920", ""},
           {"ddprun_rank_gpu_own_memory_bytes", 0, "0", ""},
           {"ddprun_rank_gpu_own_memory_bytes", 1, "4294967296", ""},
           {"ddprun_rank_gpu_temperature_celsius", 0, "71", ""},
           {"ddprun_rank_gpu_power_watts", 0, "312.5", ""},
           {"ddprun_rank_gpu_throttled", 0, "1", ",reason=\"SwPowerCap\""},
           {"ddprun_rank_gpu_uncorrectable_ecc_errors", 1, "0", ""},
           {"ddprun_rank_gpu_xids_total", 0, "1", ""},
           {"ddprun_rank_gpu_healthy", 1, "1", ""},
       }) {
    const std::string rank = std::to_string(sample.rank);
    const std::string labels = "rank=\"" + rank + "\",local_rank=\"" + rank + "\",gpu=\"" + rank + "\",uuid=\"" +
                               (sample.rank == 0 ? kUuid0 : kUuid1) + "\"" + sample.more_labels + "} " + sample.value + "\n";
    bool found = false;
    for (const std::string& line : split_lines(metrics.body)) {
      found = found || (line.starts_with(sample.name + "{node=\"0\",host=\"") && (line + "\n").ends_with(labels));
    }
    EXPECT_TRUE(found) << sample.name << "{..." << labels << " in\n" << metrics.body;
  }
  EXPECT_FALSE(contains(metrics.body, "gpu=\"1\",uuid=\"" + kUuid1 + "\",reason=")) << "GPU 1 is not throttled:\n" << metrics.body;
  if (::access("/usr/bin/promtool", X_OK) == 0) {
    TempDir scratch;
    const fs::path file = scratch.path() / "metrics.txt";
    std::ofstream(file) << metrics.body;
    int status = -1;
    const std::string lint = shell_output("promtool check metrics < '" + file.string() + "' 2>&1", &status);
    EXPECT_EQ(status, 0) << lint;
    EXPECT_EQ(lint, "") << "promtool's lint";
  } else {
    std::cerr << "promtool is not installed (scripts/setup.sh --tests installs it): /metrics not linted\n";
  }

  Outcome status = run_ddprun({"status"}, {{"XDG_RUNTIME_DIR", runtime.str()}});
  ASSERT_EQ(status.exit_status, 0) << status.err;
  EXPECT_TRUE(std::regex_search(status.out, std::regex("\n *rank .* gpu ")) ) << status.out;
  EXPECT_TRUE(std::regex_search(status.out, std::regex("\n +0 +0 +0 +" + pids[0] + " +running .* 97% 61/80G 71C thr xid79 ")))
      << status.out;
  EXPECT_TRUE(std::regex_search(status.out, std::regex("\n +1 +0 +1 +" + pids[1] + " +running .* 60% 10/80G 55C ")))
      << status.out;

  Outcome outcome = job.end();
  EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
}

// On a terminal, the status block at the bottom has the gpu column.
TEST(GpuStatus, TheTerminalStatusBlockShowsTheGpuColumn) {
  TempDir dir;
  ControlFile control(dir);
  control.write(kBusyGpus);
  PtyLaunch launch({ddprun_binary(), "--standalone", "--nproc-per-node", "2", "--devices-per-worker", "1", "--no-python",
                    "/bin/sh", script(dir, "worker.sh", kPidAndWait), dir.str()},
                   PtyLaunch::as_given, nvml_env(control));
  EXPECT_TRUE(launch.wait_for("97% 61/80G 71C thr", 15s)) << launch.output();
  EXPECT_TRUE(launch.wait_for("60% 10/80G 55C", 5s)) << launch.output();
  EXPECT_TRUE(std::regex_search(launch.output(), std::regex("rank +state .* gpu "))) << launch.output();
  std::ofstream(dir.path() / "end");
  EXPECT_EQ(launch.wait_exit(), 0) << launch.output();
}

}  // namespace
}  // namespace ddprun::testing
